"""Trials beside production (`[supervisor] trial = "beside"`), with real processes: the real `launch`
serving the simulator on a simulated GPU set (basis/simgpus.py: NVML-like memory per process and
power limits, which the simulator's engine fills as vLLM's does and the launcher reads through its
GPU seam), the real `launch frontdoor` (Caddy), and eight clients streaming through the door.

A change rejected late costs clients nothing and production is the same process; a promoted one
costs a switch; a set that cannot hold both, or a power limit NVML refuses, falls back to parking
with the reason; the power limits come back after a pass, a rejection and a SIGKILLed launcher; a
candidate waits while another engine loads on its GPUs; and one model per GPU set holds on the set."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from basis.simgpus import SimGpuSet, create
from tests.frontdoor_support import assert_clients_saw_nothing, served_to_clients
from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, append_table, free_port, write_profile
from tests.simserver import HANG_S

pytestmark = pytest.mark.integration

TOTAL_MIB = 80 * 1024  # one simulated 80 GiB GPU: production at 0.3 and a candidate at 0.3 fit beside
DEFAULT_W, CAPPED_W = 700.0, 300.0


def launch(launcher: Launcher, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    env = {**os.environ, **launcher.env}
    return subprocess.run(argv, capture_output=True, text=True, timeout=HANG_S, env=env)


def events(launcher: Launcher) -> list[str]:
    return [str(r["event"]) for r in launcher.history()]


def record(launcher: Launcher, event: str) -> dict[str, Any]:
    return [r for r in launcher.history() if r["event"] == event][-1]


def gpu_set(tmp_path: Path, *, settable: bool = True) -> SimGpuSet:
    return create(tmp_path / "gpus", 1, TOTAL_MIB, power_default_w=DEFAULT_W, settable=settable)


def beside_launcher(
    launcher_factory: LauncherFactory, gpus: SimGpuSet, *, door: bool = True, **supervisor: Any
) -> Launcher:
    launcher = launcher_factory()
    launcher.env = {"VLLM_SIM_GPU_SET": str(gpus.root)}
    table = {"trial": "beside", "park_port": free_port(), "power_limit_w": CAPPED_W, **supervisor}
    path = write_profile(launcher.profiles, "svc", free_port(), supervisor=table)
    if door:
        # a loopback admin port: the default socket in a test's deep state dir is past sun_path's 107 bytes
        door_table = {"port": free_port(), "drain_timeout_s": 60, "admin": f"127.0.0.1:{free_port()}"}
        append_table(path, "frontdoor", door_table)
    return launcher


def holders(gpus: SimGpuSet) -> set[int]:
    return set(gpus.held())


def test_a_change_rejected_late_beside_production_costs_clients_nothing(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher = beside_launcher(launcher_factory, gpus)
    with served_to_clients(launcher) as (_, clients):
        serving = launcher.status()
        production = holders(gpus)
        done = launch(launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply")
        assert done.returncode == 3, done.stdout + done.stderr  # rejected by tool_call, after health passed
        assert "production served all along: the change was tried beside it" in done.stdout
        assert_clients_saw_nothing(clients)
        status = launcher.status()
        assert status["engine_pid"] == serving["engine_pid"] and status["phase"] == "serving_last_good"
        assert holders(gpus) == production  # the same engine holds the GPU; the candidate's memory is back
        assert gpus.power_limit_w(0) == DEFAULT_W  # put back
    rejected = record(launcher, "rejected")
    assert rejected["beside"] is True and "tool_call" in rejected["reason"]
    seen = events(launcher)
    assert "beside" in seen and "power_restored" in seen
    assert "drained" not in seen and "parked" not in seen  # production was never held nor put to sleep
    assert record(launcher, "power_restored")["problems"] == []


def test_a_change_promoted_beside_production_costs_clients_a_switch_and_nothing_else(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher = beside_launcher(launcher_factory, gpus)
    with served_to_clients(launcher) as (door, clients):
        before = launcher.status()["engine_pid"]
        done = launch(launcher, "set", "svc", "max_num_seqs=3", "--tag", "s3", "--apply")
        assert done.returncode == 0, done.stdout + done.stderr
        assert_clients_saw_nothing(clients)
        switched = record(launcher, "switched")
        assert door.admin.target() == f"127.0.0.1:{switched['port']}"  # the door follows what serves
        status = launcher.status()
        assert status["phase"] == "serving" and status["engine_pid"] != before and status["trial"] is None
        assert len(holders(gpus)) == 1  # production's memory went with it
        assert gpus.power_limit_w(0) == DEFAULT_W
    seen = events(launcher)
    trial = seen[seen.index("beside") :]  # the change's records, after the first start's
    assert trial.index("promoted") < trial.index("drained") < trial.index("power_restored")
    assert record(launcher, "drained")["left"] == 0  # production's requests in flight finished there
    loads = [e for e in gpus.events() if e.event in ("load_begin", "load_end")]
    assert [e.event for e in loads] == ["load_begin", "load_end"] * 2  # never two loads at once


def test_a_set_that_cannot_hold_both_falls_back_to_parking_with_the_reason(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher = beside_launcher(launcher_factory, gpus, park="sleep", door=True)
    write = launcher.profiles / "svc.toml"
    write.write_text(
        write.read_text().replace("gpu_memory_utilization = 0.3", "gpu_memory_utilization = 0.5")
    )
    plan = launch(launcher, "--profile", "svc", "--dry-run")
    assert "trial: beside production" in plan.stdout
    with served_to_clients(launcher) as (_, clients):
        shown = launch(launcher, "--profile", "svc", "--dry-run", "--json")
        trial = json.loads(shown.stdout)["trial"]
        assert trial["room"] == "refused" and trial["falls_back_to"] == "park", trial
        done = launch(launcher, "set", "svc", "max_num_seqs=3", "--tag", "s3", "--apply")
        assert done.returncode == 0, done.stdout + done.stderr
        assert_clients_saw_nothing(clients)
    skipped = record(launcher, "beside_skipped")
    assert "< needed" in skipped["reason"] and skipped["instead"] == "park", skipped
    seen = events(launcher)
    assert seen.index("beside_skipped") < seen.index("parked")  # then parked, as without beside
    assert "beside" not in seen and gpus.power_limit_w(0) == DEFAULT_W  # nothing lowered
    metrics = (launcher.state / "metrics" / "vllm_gate_svc.prom").read_text()
    assert 'vllm_gate_beside_skipped_total{profile="svc"} 1.0' in metrics


def test_a_power_limit_nvml_refuses_falls_back_with_nvmls_words(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path, settable=False)
    launcher = beside_launcher(launcher_factory, gpus, door=True)
    with served_to_clients(launcher) as (_, clients):
        done = launch(launcher, "set", "svc", "max_num_seqs=3", "--tag", "s3", "--apply")
        assert done.returncode == 0, done.stdout + done.stderr
        assert_clients_saw_nothing(clients)
    skipped = record(launcher, "beside_skipped")
    assert "power limit" in skipped["reason"] and "Permission" in skipped["reason"], skipped
    assert skipped["instead"] == "stop" and "drained" in events(launcher)


def serving_without_door(launcher_factory: LauncherFactory, gpus: SimGpuSet) -> Launcher:
    """`svc` served on the set, clients' proxy told by an on_switch hook (no front door)."""
    launcher = beside_launcher(launcher_factory, gpus, door=False, on_switch=["/bin/true"])
    launcher.start()
    launcher.wait_phase("serving")
    return launcher


def hanging_trial(launcher_factory: LauncherFactory, gpus: SimGpuSet) -> tuple[Launcher, str]:
    """`svc` served, then a change whose candidate never gets ready: caught during its trial, its power
    limit lowered; (the launcher, the profile's text as it served)."""
    launcher = serving_without_door(launcher_factory, gpus)
    profile = launcher.profiles / "svc.toml"
    served_text = profile.read_text()
    profile.write_text(served_text.replace("[args]", '[args]\nsim_hang_at = "loading"'))  # never ready
    launcher.signal(signal.SIGHUP)
    launcher.wait_for(lambda s: s.get("trial") is not None and gpus.power_limit_w(0) == CAPPED_W)
    return launcher, served_text


def test_the_power_limits_a_sigkilled_launcher_lowered_come_back_at_the_next_start(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher, served_text = hanging_trial(launcher_factory, gpus)
    launcher.signal(signal.SIGKILL)
    launcher.wait_exit()
    launcher.cleanup()  # the engines it left, ended by their groups (this test started them)
    assert gpus.power_limit_w(0) == CAPPED_W  # nobody put it back: the launcher was killed
    (launcher.profiles / "svc.toml").write_text(served_text)
    again = launcher_factory()
    again.env = launcher.env
    again.start()
    assert again.proc is not None
    pid = again.proc.pid  # the killed launcher's status says serving: wait for this one's
    again.wait_for(lambda s: s.get("launcher_pid") == pid and s.get("phase") == "serving")
    assert gpus.power_limit_w(0) == DEFAULT_W
    assert record(again, "power_restored")["after"] == "a launcher that was killed"
    again.signal(signal.SIGTERM)
    again.wait_exit()


def test_a_sigterm_during_the_trial_stops_both_engines_and_puts_the_power_limit_back(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher, _ = hanging_trial(launcher_factory, gpus)
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    assert gpus.power_limit_w(0) == DEFAULT_W and holders(gpus) == set()  # both engines gone, limit back
    assert record(launcher, "power_restored")["problems"] == []


def test_one_model_per_gpu_set_holds_on_the_simulated_set(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher = serving_without_door(launcher_factory, gpus)
    try:
        write_profile(launcher.profiles, "other", free_port())
        tried = launch(launcher, "try", "--profile", "other")
        assert tried.returncode == 4, tried.stdout + tried.stderr
        assert "one model per GPU set" in tried.stdout + tried.stderr
        assert f"launcher pid {launcher.proc.pid if launcher.proc else 0}" in tried.stdout + tried.stderr
    finally:
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit()


# Another launcher's engine loading on GPU 0: holds the GPU's load lock until stdin closes.
LOADING = """
import sys
from pathlib import Path
from launcher.host.gpu_locks import LoadLocks
with LoadLocks(Path(sys.argv[1]), ["0"], "elsewhere"):
    print("loading", flush=True)
    sys.stdin.read()
"""


def test_a_candidate_waits_while_another_engine_loads_on_its_gpus(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    gpus = gpu_set(tmp_path)
    launcher = serving_without_door(launcher_factory, gpus)
    loading = subprocess.Popen(
        [str(LAUNCH.with_name("python")), "-c", LOADING, str(launcher.state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert loading.stdout is not None and loading.stdout.readline() == "loading\n"
        profile = launcher.profiles / "svc.toml"
        profile.write_text(profile.read_text().replace("max_num_seqs = 4", "max_num_seqs = 3"))
        launcher.signal(signal.SIGHUP)
        launcher.wait_for(lambda _: "waiting: GPU 0 is loading for profile 'elsewhere'" in launcher.output())
        assert "start" not in events(launcher)[events(launcher).index("beside") :]  # not spawned meanwhile
    finally:
        assert loading.stdin is not None
        loading.stdin.close()
        loading.wait(HANG_S)
        loading.stdout.close() if loading.stdout else None
    launcher.wait_for(
        lambda s: (
            s.get("phase") == "serving" and s.get("trial") is None and "promoted" in events(launcher)[1:]
        )
    )
    launcher.signal(signal.SIGTERM)
    launcher.wait_exit()
