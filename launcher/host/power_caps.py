"""Each GPU's power limit for a trial beside production (`[supervisor] power_limit_w`).

Two engines on one GPU set draw more than one: the field notes' PSU tripped with two models loading
on four cards. For the length of a trial beside production the launcher lowers each GPU's limit
through NVML and puts it back after — on every exit path: what each limit was is written (atomically)
before the first one changes, and removed only once all are back, so the next start of a launcher
that was SIGKILLed meanwhile restores them from that record (`restore`). Where NVML refuses (no
permission, a GPU without the control, a value outside its range) nothing stays changed and the
caller falls back to parking, with NVML's words as the reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.atomicfile import read_bytes_nofollow, write_atomic
from launcher.host.gpu import GpuDevice, GpuProbe, resolve_device

RECORD_MAX_BYTES = 64 * 1024  # a record names a few GPUs: anything larger is not ours


@dataclass(frozen=True, slots=True)
class Capped:
    """One GPU whose limit the trial lowered: where to find it again and what to put back."""

    uuid: str
    token: str
    was_w: float
    set_w: float

    def to_json(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "gpu": self.token, "was_w": self.was_w, "set_w": self.set_w}


class PowerCaps:
    """The power limits of one profile's GPU set, lowered for a trial and restored after it."""

    def __init__(
        self,
        probe: Callable[[], GpuProbe],
        record: Path,
        pid: int | None = None,
        write: Callable[[Path, str], None] = write_atomic,
    ) -> None:
        self.probe = probe
        self.record = record
        self.pid = os.getpid() if pid is None else pid
        self.write = write  # the state store's writer (a test passes one that finds the disk full)

    def lower(self, gpus: Sequence[str], watts: float) -> tuple[str | None, list[Capped]]:
        """Lower each GPU's limit to `watts` (one already at or under it is left alone): (why not,
        with nothing left changed; else None) and what was lowered."""
        problems = self.restore()  # a killed launcher's caps first: never stack two records
        if problems:
            return "the last trial's power limits are not restored: " + "; ".join(problems), []
        with self.probe() as probe:
            why = probe.skip_reason()
            if why is not None:
                return f"no power control: {why}", []
            plan, why = _plan(probe, gpus, watts)
            if why is not None:
                return why, []
            try:
                self._write(plan)
            except OSError as err:  # a full disk: nothing is lowered that could not be put back
                return f"cannot record the power limits in {self.record}: {err.strerror or err}", []
            for done, cap in enumerate(plan):
                why = probe.set_power_limit(_index(probe, cap.uuid), cap.set_w)
                if why is not None:
                    self._put_back(probe, plan[:done])
                    return f"GPU {cap.token}: power limit {cap.set_w:g} W not set: {why}", []
        return None, plan

    def restore(self) -> list[str]:
        """Put back every limit the record names; the record goes once all are back. Problems, in words."""
        plan, problem = self._read()
        if problem is not None:
            return [problem]
        if not plan:
            return []
        with self.probe() as probe:
            why = probe.skip_reason()
            if why is not None:
                return [f"power limits of {len(plan)} GPU(s) not restored: {why}"]
            problems = self._put_back(probe, plan)
        if not problems:
            try:
                self.record.unlink(missing_ok=True)
            except OSError as err:
                problems.append(f"limits restored, but {self.record} stays: {err.strerror or err}")
        return problems

    def _put_back(self, probe: GpuProbe, plan: Sequence[Capped]) -> list[str]:
        problems = []
        for cap in plan:
            index = _index(probe, cap.uuid)
            why = "it is gone" if index < 0 else probe.set_power_limit(index, cap.was_w)
            if why is not None:
                problems.append(f"GPU {cap.token} not restored to {cap.was_w:g} W: {why}")
        return problems

    def _write(self, plan: Sequence[Capped]) -> None:
        body = {"pid": self.pid, "gpus": [cap.to_json() for cap in plan]}
        self.write(self.record, json.dumps(body, indent=1) + "\n")

    def _read(self) -> tuple[list[Capped], str | None]:
        """The record's GPUs (none when there is no record); a record that cannot be read is a problem
        and stays, for an operator to look at, rather than a guess at what the limits were."""
        try:
            raw = read_bytes_nofollow(self.record, RECORD_MAX_BYTES)
        except FileNotFoundError:
            return [], None
        except OSError as err:
            return [], f"{self.record}: {err.strerror or err}"
        try:
            body = json.loads(raw)
            plan = [
                Capped(str(g["uuid"]), str(g["gpu"]), float(g["was_w"]), float(g["set_w"]))
                for g in body["gpus"]
            ]
        except (ValueError, TypeError, KeyError) as err:
            return (
                [],
                f"{self.record} is not a power-cap record ({type(err).__name__}); set the limits by hand",
            )
        return plan, None


def _plan(probe: GpuProbe, gpus: Sequence[str], watts: float) -> tuple[list[Capped], str | None]:
    """What to lower, or why it cannot be: a GPU missing, without a limit, or `watts` out of its range."""
    devices = probe.devices()
    plan = []
    for token in gpus:
        device = resolve_device(token, devices)
        if device is None:
            return [], f"GPU {token} is not on this host"
        limit = probe.power_limit(device.index)
        if limit is None:
            return [], f"GPU {token} ({device.name}) reports no power limit"
        if not limit.min_w <= watts <= limit.max_w:
            return [], f"GPU {token}: {watts:g} W is outside its range {limit.min_w:g}–{limit.max_w:g} W"
        if limit.current_w > watts:
            plan.append(Capped(device.uuid, token, limit.current_w, watts))
    return plan, None


def _index(probe: GpuProbe, uuid: str) -> int:
    found: GpuDevice | None = next((d for d in probe.devices() if d.uuid == uuid), None)
    return found.index if found is not None else -1
