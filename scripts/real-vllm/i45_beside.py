#!/usr/bin/env python3
"""Issue 45 on the GPU machine: changes tried beside production, on the real vLLM 0.26.0.

`launch frontdoor` and `launch --profile tiny-beside` (trial = "beside", both engines at 0.3 of the
GPU) run; eight clients stream through the door (i41_frontdoor.py's Clients and Session); a change
is rejected late (the kernel marker lost 5 s after the candidate is up), the file is put back, and a
change is promoted. Per change: requests, failed, cut, the longest wait (send → first token), the
launcher's records (beside, beside_skipped, rejected/promoted, drained, power_restored), and the
production engine's pid before and after (the same after a rejection).

A sampler reads the GPUs every 0.5 s for the whole run through the launcher's GPU seam
(`gpu_probe`: NVML on the device, the simulated set of VLLM_SIM_GPU_SET in a rehearsal): memory
used, which pids hold how much, the power limit and (NVML only) the draw, so each change shows its
GPUs before, during (the trial: from `beside` to `power_restored`) and after. Before anything
starts, each GPU's power range is read and its limit set once to its current value: whether NVML
lets this machine set it. The run's copy of the profile gets a power_limit_w inside that range, or
none where NVML refuses (the trial would fall back to stop, and the run would measure no trial).
Everything to OUT/i45-beside.json, findings to OUT/summary.txt; rehearsable (check-i45.sh).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from i41_frontdoor import Session, epoch  # this script's folder is on sys.path

from launcher.host.gpu import GpuDevice, GpuProbe, NvmlProbe
from launcher.host.gpu_sim import gpu_probe

SAMPLE_S = 0.5
RECORDS = ("beside", "beside_skipped", "rejected", "promoted", "drained", "power_restored", "start")
MIB = 1 << 20


def power_draw(probe: GpuProbe) -> Callable[[int], float | None]:
    """NVML's power draw in watts (the seam reads none: the launcher never needs it); None elsewhere."""
    if not isinstance(probe, NvmlProbe):
        return lambda index: None
    import pynvml

    def draw(index: int) -> float | None:
        try:
            return float(pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(index))) / 1000
        except pynvml.NVMLError:
            return None

    return draw


class GpuSampler:
    """Every SAMPLE_S, each GPU's memory used, its holders (pid → MiB), power limit and draw; and,
    the first time a pid is seen, its ancestors (to tell production's engine from the candidate's)."""

    def __init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.lineage: dict[int, list[int]] = {}
        self.problem: str | None = None
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def _run(self) -> None:
        with gpu_probe() as probe:
            self.problem = probe.skip_reason()
            if self.problem is not None:
                return
            draw = power_draw(probe)
            while not self.stop.is_set():
                try:
                    gpus = [self._gpu(probe, d, draw) for d in probe.devices()]
                except Exception as err:  # one bad reading is a gap in the series, not its end
                    self.failures.append(f"{time.time():.1f}: {type(err).__name__}: {err}"[:300])
                else:
                    self.samples.append({"t": time.time(), "gpus": gpus})
                self.stop.wait(SAMPLE_S)

    def _gpu(self, probe: GpuProbe, device: GpuDevice, draw: Callable[[int], float | None]) -> dict[str, Any]:
        limit = probe.power_limit(device.index)
        held = {
            p.pid: None if p.used_bytes is None else p.used_bytes // MIB
            for p in probe.processes(device.index)
        }
        for pid in held:
            self.lineage.setdefault(pid, ancestors(pid))
        return {
            "gpu": device.index,
            "used_mib": device.used_bytes // MIB,
            "total_mib": device.total_bytes // MIB,
            "limit_w": None if limit is None else limit.current_w,
            "draw_w": draw(device.index),
            "pids": held,
        }

    def role(self, pid: int, production: int | None, candidate: int | None) -> str:
        family = [pid, *self.lineage.get(pid, [])]
        if production in family:
            return "production"
        return "candidate" if candidate in family else f"other pid {pid}"

    def between(self, since: float, until: float) -> list[dict[str, Any]]:
        return [s for s in self.samples if since <= s["t"] <= until]


def ancestors(pid: int) -> list[int]:
    """Its parent, grandparent, ...; empty where the pid is not in this PID namespace (NVML in a
    container may report the host's pids)."""
    try:
        return [p.pid for p in psutil.Process(pid).parents()]
    except psutil.Error:
        return []


def power_check() -> dict[str, Any]:
    """Each GPU's power range, and whether NVML lets this process set its limit: the seam's
    set_power_limit (nvmlDeviceSetPowerManagementLimit on the device) to the current value, harmless."""
    with gpu_probe() as probe:
        why = probe.skip_reason()
        if why is not None:
            return {"problem": why, "gpus": []}
        gpus = []
        for device in probe.devices():
            limit = probe.power_limit(device.index)
            found: dict[str, Any] = {"gpu": device.index, "name": device.name, "limit": None, "set": None}
            if limit is not None:
                found["limit"] = {
                    "current_w": limit.current_w,
                    "default_w": limit.default_w,
                    "min_w": limit.min_w,
                    "max_w": limit.max_w,
                }
                found["set"] = probe.set_power_limit(device.index, limit.current_w) or "permitted"
            gpus.append(found)
        return {"problem": None, "probe": type(probe).__name__, "gpus": gpus}


def fit_power_limit(profile: Path, check: dict[str, Any]) -> tuple[float | None, str]:
    """The run's copy of the profile: its power_limit_w kept, moved into every GPU's range and under
    its limit now (so that the trial lowers it), or removed where NVML cannot set one. The value
    used, and why, in words."""
    text = profile.read_text()
    found = re.search(r"^power_limit_w = ([0-9.]+)", text, re.M)
    if found is None:
        return None, "the profile sets no power_limit_w"
    wanted = float(found.group(1))
    limits = [g["limit"] for g in check["gpus"]]
    refused = [str(g["set"]) for g in check["gpus"] if g["set"] != "permitted"]
    if check["problem"] or not limits or refused:
        profile.write_text(text.replace(found.group(0), "# power_limit_w: NVML cannot set it here"))
        why = check["problem"] or "; ".join(refused) or "no GPU"
        return (
            None,
            f"power_limit_w removed from the run's profile: {why} (the trial would fall back to stop)",
        )
    low, high = max(x["min_w"] for x in limits), min(x["max_w"] for x in limits)
    current = min(x["current_w"] for x in limits)
    used = min(max(wanted, low), high)
    if used >= current:  # nothing would be lowered: halfway down to the floor, so the trial shows one
        used = float(round((low + current) / 2))
    if used != wanted:
        profile.write_text(text.replace(found.group(0), f"power_limit_w = {used:g}"))
        return used, (
            f"power_limit_w {wanted:g} W does not lower these GPUs' limits ({current:g} W now, "
            f"{low:g}–{high:g} W allowed): {used:g} W instead"
        )
    return used, f"power_limit_w {used:g} W, below the {current:g} W now, inside {low:g}–{high:g} W"


class BesideSession(Session):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.gpus = GpuSampler()

    def say(self, text: str) -> None:
        line = f"[i45 {self.args.profile}] {text}"
        print(line, flush=True)
        with (self.out / "summary.txt").open("a") as f:
            f.write(line + "\n")

    def change(self, name: str, *keys: str, tag: str) -> dict[str, Any]:
        """i41's change (eight clients through the door all along), then what the trial did to the
        engines and the GPUs."""
        since = time.time()
        production = self.status().get("engine_pid")
        result = super().change(name, *keys, tag=tag)
        after = self.status().get("engine_pid")
        rows = self.history(since)
        records = {event: next((r for r in rows if r["event"] == event), None) for event in RECORDS}
        candidate = (records["start"] or {}).get("engine_pid")
        result.update(
            {
                "records": records,
                "engine_pid_before": production,
                "engine_pid_after": after,
                "candidate_pid": candidate,
                "gpu": self.gpu_phases(rows, since, production, candidate),
            }
        )
        same = "the same" if production == after else "another"
        self.say(
            f"{name}: production engine pid {production} → {after} ({same}); candidate pid {candidate}; "
            f"{self.told(records)}"
        )
        for when, seen in result["gpu"].items():
            self.say(f"{name}: GPUs {when}: {seen}")
        return result

    @staticmethod
    def told(records: dict[str, Any]) -> str:
        beside, skipped, restored = records["beside"], records["beside_skipped"], records["power_restored"]
        drained, rejected = records["drained"], records["rejected"]
        parts = [
            f"beside on port {beside['port']}, power_limit_w {beside.get('power_limit_w')}"
            if beside
            else "no beside record",
            f"beside_skipped: {skipped['reason']} ({skipped['instead']} instead)" if skipped else "",
            f"rejected (beside {rejected.get('beside')}): {str(rejected.get('reason'))[:120]}"
            if rejected
            else "",
            "promoted" if records["promoted"] else "",
            f"drained: {drained['left']} left in {drained['waited_s']} s" if drained else "not drained",
            f"power_restored: problems {restored['problems']}" if restored else "no power_restored",
        ]
        return "; ".join(p for p in parts if p)

    def gpu_phases(
        self, rows: list[dict[str, Any]], since: float, production: Any, candidate: Any
    ) -> dict[str, str]:
        """The GPUs before the trial, during it (`beside` → `power_restored`, else the change's first
        → last record) and at the end of the phase."""
        if not rows or not self.gpus.samples:
            return {"all": f"no samples ({self.gpus.problem or 'no record'})"}
        marks = {r["event"]: epoch(r["ts"]) for r in reversed(rows)}
        start = marks.get("beside", epoch(rows[0]["ts"]))
        end = marks.get("power_restored", epoch(rows[-1]["ts"]))
        before = self.gpus.between(since, start)[-1:]
        windows = {"before": before, "during": self.gpus.between(start, end), "after": self.gpus.samples[-1:]}
        return {when: self.describe(samples, production, candidate) for when, samples in windows.items()}

    def describe(self, samples: list[dict[str, Any]], production: Any, candidate: Any) -> str:
        if not samples:
            return "no sample"
        told = []
        for index in sorted({g["gpu"] for s in samples for g in s["gpus"]}):
            mine = [g for s in samples for g in s["gpus"] if g["gpu"] == index]
            holders: dict[str, int] = {}
            shared = 0  # samples in which more than one engine held the GPU
            for g in mine:
                roles = {pid: self.gpus.role(int(pid), production, candidate) for pid in g["pids"]}
                shared += len(set(roles.values())) > 1
                for pid, role in roles.items():
                    holders[role] = max(holders.get(role, 0), g["pids"][pid] or 0)
            limits = sorted({g["limit_w"] for g in mine if g["limit_w"] is not None})
            draws = [g["draw_w"] for g in mine if g["draw_w"] is not None]
            drawn = f"draw up to {max(draws):.0f} W" if draws else "draw not read"
            used = max(g["used_mib"] for g in mine)
            told.append(
                f"GPU {index}: used up to {used:,} of {mine[0]['total_mib']:,} MiB, "
                f"held by {holders or 'nobody'} (MiB; more than one engine in {shared} of {len(mine)} "
                f"samples), power limit {limits or 'unknown'} W, {drawn}"
            )
        return " | ".join(told)

    def run(self) -> None:
        check = power_check()
        self.results["nvml"] = check
        for gpu in check["gpus"]:
            self.say(
                f"GPU {gpu['gpu']} ({gpu['name']}): power limit {gpu['limit']}; setting it to its current "
                f"value through {check['probe']}: {gpu['set']}"
            )
        if check["problem"]:
            self.say(f"GPUs not read: {check['problem']}")
        used, why = fit_power_limit(Path(self.args.profiles) / f"{self.args.profile}.toml", check)
        self.results["power_limit_w"] = {"used": used, "why": why}
        self.say(why)
        with self.gpus:
            door = self.spawn("door", "frontdoor", "--profile", self.args.profile)
            launcher = self.spawn("launcher", "--profile", self.args.profile)
            try:
                started = self.wait_serving(launcher)
                self.say(f"serving in {started:.1f} s; door pid {door.pid}, alive {door.poll() is None}")
                self.change("rejected_late", self.args.bad_change, tag="bad")
                self.rollback("bad")
                self.change("promoted", "max_num_seqs=16", tag="seqs")
            except BaseException as err:  # I45_LIMIT_S's SIGINT too: say where the run stopped
                self.say(f"stopped early: {type(err).__name__}: {err}"[:300])
                raise
            finally:
                self.stop_all()
                time.sleep(3.0)  # the GPUs after everything stopped
                self.finish()

    def finish(self) -> None:
        self.say(f"after the run: {self.describe(self.gpus.samples[-1:], None, None)}")
        self.say(
            f"GPU samples: {len(self.gpus.samples)}, failed readings: {len(self.gpus.failures)} "
            f"{self.gpus.failures[:2]}; sampler problem: {self.gpus.problem}"
        )
        self.results.update(
            {
                "gpu_samples": self.gpus.samples,
                "lineage": self.gpus.lineage,
                "sampler_problem": self.gpus.problem,
                "sampler_failures": self.gpus.failures,
            }
        )
        (self.out / "i45-beside.json").write_text(json.dumps(self.results, indent=1, default=str))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profiles", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--profile", default="tiny-beside")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--door-port", type=int, default=8091)
    parser.add_argument("--bad-change", default="attention_backend=TRITON_ATTN")
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    BesideSession(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
