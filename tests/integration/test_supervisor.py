"""The real `launch` against the real simulator: promote, reject each fault and serve last-good,
stop cleanly, refuse a second launcher, notice engine death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from launcher.procgroup import group_members
from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, free_port, write_profile
from tests.simserver import wait_gone

pytestmark = pytest.mark.integration


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def test_demo_like_profile_promotes_and_stops_cleanly(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    port = free_port()
    write_profile(launcher.profiles, "svc", port)
    launcher.start()
    status = launcher.wait_phase("serving")
    assert [g["verdict"] for g in status["gates"]] == ["skip", "pass", "pass", "pass"]
    engine = psutil.Process(status["engine_pid"])
    tree = [engine.pid, *(c.pid for c in engine.children(recursive=True))]
    assert any("VLLM::EngineCore" in " ".join(psutil.Process(p).cmdline()) for p in tree)
    record = json.loads((launcher.state / "profiles" / "svc" / "last_good.json").read_text())
    assert record["fingerprint"] == status["serving_fingerprint"] and record["port"] == port
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    assert _alive(tree) == []
    events = [r["event"] for r in launcher.history()]
    assert events == ["start", "gates", "promoted", "engine_stopped", "stopped"]
    assert launcher.status()["phase"] == "stopped"


# Five 1 s windows, the rule's threshold scaled down with them (a real gate uses 20 s and 1024 MiB):
# the leak grows 100 MiB a window, and a warm-up's 0.45 s stays inside the first; an engine would
# have to stall for most of a second for either verdict to move (docs/decisions/0013).
FAST_LEAK_GATE = {"windows": 5, "window_s": 1.0, "min_growth_mib": 100, "concurrency": 1,
                  "prompt_paragraphs": 4, "max_tokens": 8}  # fmt: skip
# The leak and the warm-up grow with time, not with requests: decode at the real model's pace keeps the
# gate's traffic to a few requests a second instead of a CPU-bound loop.
REAL_TIME_DECODE = {"sim_speed": 1}
# fault -> (the profile's args, its gate tables, what the rejection says)
FAULTS: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]], str]] = {
    "kernel_marker": ({}, {"kernel_marker": {"patterns": ["IQ4XS_BMMVQ_READY"], "after_ready_s": 0.5}},
                      "IQ4XS_BMMVQ_READY not seen"),
    "capture_fallback": ({"sim_capture_fallback": True}, {}, "fell back to [1, 2]"),
    "eager": ({"sim_eager_fallback": True}, {}, "eager mode though the profile did not ask"),
    "model_name": ({"sim_serve_model_name": "fable-27b"}, {}, "server serves ['fable-27b'], profile expects ['sim']"),
    "tool_call": ({"sim_tool_fault": "malformed"}, {}, "not valid JSON"),
    "memory_leak": ({"sim_leak_mib_per_min": 6000, **REAL_TIME_DECODE}, {"memory_leak": FAST_LEAK_GATE},
                    "rss leak: grew 3+ windows"),
}  # fmt: skip


def _order(gates: dict[str, Any]) -> list[str] | None:
    return ["health", "memory_leak"] if "memory_leak" in gates else None


@pytest.fixture(scope="module")
def serving_good(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Launcher, int, dict[str, Any]]]:
    """One launcher serving the good profile for every fault: each fault is a change sent to a server
    in production, as an operator sends them one after another, and each rolls back to the same
    last-good. Stopped while serving last-good, it exits 3."""
    root = tmp_path_factory.mktemp("faults")
    (root / "profiles").mkdir()
    launcher = Launcher(root / "profiles", root / "state", "svc")
    port = free_port()
    write_profile(launcher.profiles, "svc", port)  # the default chain: the leak gate is opt-in
    launcher.start()
    try:
        yield launcher, port, launcher.wait_phase("serving")
        launcher.signal(signal.SIGTERM)
        assert launcher.wait_exit() == 3  # stopped while serving last-good
    finally:
        leftovers = launcher.cleanup()
    assert leftovers == [], f"processes were left behind: {leftovers}"


@pytest.mark.xdist_group("test_supervisor_faults")  # one worker runs them all, on the one launcher
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_gate_rejects_its_fault_and_last_good_keeps_serving(
    fault: str, serving_good: tuple[Launcher, int, dict[str, Any]]
) -> None:
    launcher, port, good = serving_good
    args, gates, expected = FAULTS[fault]
    seq = int(launcher.status().get("reload_seq") or 0)
    before = len(launcher.history())
    write_profile(launcher.profiles, "svc", port, args=args, gates=gates, order=_order(gates))
    launcher.signal(signal.SIGHUP)
    status = launcher.wait_for(lambda s: s.get("reload_seq") == seq + 1, timeout_s=120)
    since = launcher.history()[before:]
    judged = [r.get("gates") for r in since if r["event"] == "gates"]
    assert status["phase"] == "serving_last_good", (status, judged)
    assert expected in status["rollback_reason"]
    assert status["serving_fingerprint"] == good["serving_fingerprint"]
    events = [r["event"] for r in since if r["event"] != "engine_stopped"]
    assert events == ["reload", "start", "gates", "rejected", "rollback", "start", "gates", "serving_last_good"]
    rejected = next(r for r in since if r["event"] == "rejected")
    assert expected in rejected["reason"]


def test_no_last_good_means_exit_1_with_the_report(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_capture_fallback": True})
    launcher.start()
    assert launcher.wait_exit(timeout_s=60) == 1
    status = launcher.status()
    assert status["phase"] == "failed" and "fell back to [1, 2]" in status["rollback_reason"]
    assert _alive(launcher.engine_pids()) == []


def test_second_launcher_is_refused_naming_the_pid(launcher_factory: LauncherFactory) -> None:
    first = launcher_factory()
    write_profile(first.profiles, "svc", free_port())
    first.start()
    first.wait_phase("serving")
    second = subprocess.run(
        [str(LAUNCH), "--profiles-dir", str(first.profiles), "--state-dir", str(first.state), "--profile", "svc"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2 and first.proc is not None
    assert f"already running (pid {first.proc.pid})" in second.stderr
    first.signal(signal.SIGTERM)
    assert first.wait_exit() == 0


def test_sigterm_mid_gate_leaves_no_process(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_hang_at": "capture"})
    launcher.start()
    launcher.wait_phase("gating")
    deadline = time.monotonic() + 30
    while not launcher.engine_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    engine = psutil.Process(launcher.engine_pids()[0])
    deadline = time.monotonic() + 30
    while len(engine.children(recursive=True)) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    tree = [engine.pid, *(c.pid for c in engine.children(recursive=True))]
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit(timeout_s=40) == 0
    assert _alive(tree) == []


def test_engine_death_after_promotion_exits_5(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    status = launcher.wait_phase("serving")
    os.killpg(status["engine_pid"], signal.SIGKILL)
    assert launcher.wait_exit(timeout_s=20) == 5
    died = next(r for r in launcher.history() if r["event"] == "engine_died")
    assert "killed by SIGKILL" in died["how"]
    assert launcher.status()["phase"] == "failed"


def test_engine_core_sigkill_is_noticed_and_named_before_the_api_server_reacts(
    launcher_factory: LauncherFactory,
) -> None:
    """vLLM's API server outlives its killed engine core until its own watchdog fires (4.36 s on
    0.26.0; here 12 s): a launcher waiting on the API server alone cannot name the engine core."""
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_watchdog_s": 600})
    launcher.start()
    status = launcher.wait_phase("serving")
    api_server = psutil.Process(status["engine_pid"])
    core = next(p for p in api_server.children(recursive=True) if p.name() == "VLLM::EngineCore")
    os.kill(core.pid, signal.SIGKILL)
    assert launcher.wait_exit(timeout_s=20) == 5
    died = next(r for r in launcher.history() if r["event"] == "engine_died")
    assert died["how"] == f"VLLM::EngineCore pid {core.pid} killed by SIGKILL"
    assert (died["process"], died["pid"]) == ("VLLM::EngineCore", core.pid)
    assert f"VLLM::EngineCore pid {core.pid} killed by SIGKILL" in launcher.status()["detail"]


def test_a_sigkilled_launcher_takes_its_engine_with_it(launcher_factory: LauncherFactory) -> None:
    """SIGKILL cannot be caught: the kernel's parent-death signal makes the API server shut down its
    engine itself (engine.py `die_with_this_process`); nothing is left for the next preflight."""
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    status = launcher.wait_phase("serving")
    engine = [psutil.Process(pid) for pid in group_members(status["engine_pid"])]
    assert any(p.name() == "VLLM::EngineCore" for p in engine)  # besides the API server
    launcher.signal(signal.SIGKILL)
    launcher.wait_exit()
    assert wait_gone(engine, timeout_s=20) == [], "the engine outlived its SIGKILLed launcher"


def test_allocator_warm_up_that_plateaus_passes_the_leak_gate(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    # +150 MiB of real RSS in the first 0.45 s of traffic, then flat: windows 1-2 grow, the rest do not.
    args = {"sim_warmup_growth_mib": 150, "sim_warmup_growth_s": 0.45, **REAL_TIME_DECODE}
    write_profile(profiles, "warm", free_port(), args=args, gates={"memory_leak": FAST_LEAK_GATE},
                  order=["health", "memory_leak"])  # fmt: skip
    proc = subprocess.run(
        [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(tmp_path / "state"),
         "try", "--profile", "warm", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    leak = next(g for g in report["gates"] if g["name"] == "memory_leak")
    assert proc.returncode == 0, leak
    series = leak["evidence"]["rss_mib"]
    grown = series[-1] - leak["evidence"]["rss_before_traffic_mib"]
    assert grown > 100, f"the warm-up growth did not show: {series}"
    assert "no leak" in leak["summary"]
