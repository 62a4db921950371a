"""park = "sleep" with real processes: the real `launch` serving the real simulator, whose sleep mode
answers as vLLM 0.26.0's dev routes do (docs/vllm-facts.md §12); changes applied with the real
`launch set --apply`."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import psutil
import pytest
import requests

from tests.launcher_run import LAUNCH, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration


def launch(launcher: Any, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def events(launcher: Any) -> list[str]:
    return [str(r["event"]) for r in launcher.history()]


def record(launcher: Any, event: str) -> dict[str, Any]:
    return next(r for r in launcher.history() if r["event"] == event)


def serve_parked(launcher_factory: LauncherFactory, **args: Any) -> tuple[Any, int, int, dict[str, Any]]:
    launcher = launcher_factory()
    port, park_port = free_port(), free_port()
    supervisor = {"park": "sleep", "park_port": park_port, **args.pop("supervisor", {})}
    write_profile(launcher.profiles, "svc", port, args=args, supervisor=supervisor)
    launcher.start()
    return launcher, port, park_port, launcher.wait_phase("serving")


def stop(launcher: Any, code: int) -> None:
    import signal

    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == code


def answers(port: int) -> bool:
    body: dict[str, Any] = {
        "model": "sim",
        "prompt": "The capital of France is",
        "max_tokens": 4,
        "temperature": 0,
    }
    try:
        return (
            requests.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=10).status_code == 200
        )
    except requests.RequestException:
        return False


def test_a_rejected_change_wakes_the_sleeper_and_it_serves_again(launcher_factory: LauncherFactory) -> None:
    launcher, port, park_port, serving = serve_parked(launcher_factory)
    done = launch(
        launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply", "--timeout-s", "60"
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert events(launcher)[3:] == [
        "greedy_reference",  # its answer to the greedy prompt: the wake must repeat it
        "reload",
        "parked",
        "start",
        "gates",
        "engine_stopped",
        "rejected",
        "woken",
    ]
    candidate = [r for r in launcher.history() if r["event"] == "start"][1]
    assert f"--port {park_port}" in " ".join(candidate["argv"])  # the sleeper kept its own port
    status = launcher.status()
    assert status["phase"] == "serving_last_good" and status["engine_pid"] == serving["engine_pid"]
    assert answers(port)  # the same engine, awake, on its port
    woken = record(launcher, "woken")
    assert woken["port"] == port and wake_phases(woken) == ["wait_memory", "wake_up", "checks", "gates"]
    log = (launcher.state / "profiles" / "svc" / "logs" / "engine.log").read_text()
    assert "Resetting prefix cache..." in log and "wake up the engine with tags: None" in log
    shown = launch(launcher, "history", "--profile", "svc", "--starts")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines}
    assert rows["kind"][0] == "cold" and rows["kind"][-1] == "wake"  # the first start, …, the wake
    assert rows["wake_up"][0] == "-" and rows["compile"][-1] == "-"  # each kind its own phases
    assert lines[-1].endswith(": woken from sleep (was a cold start)")  # not a faster disk
    stop(launcher, 3)
    told = [json.loads(line)["msg"] for line in launcher.output().splitlines() if '"wake.timeline"' in line]
    assert len(told) == 1 and told[0].startswith("wake timeline: ")  # the record's phases, one line
    phases = [part.split()[0] for part in told[0].removeprefix("wake timeline: ").split(" · ")]
    assert phases == ["wait_memory", "wake_up", "checks", "gates", "total"]


def wake_phases(record: dict[str, Any]) -> list[str]:
    """The names of a wake's phases; checked contiguous: they add up to the record's seconds."""
    timeline = record["timeline"]
    assert timeline["kind"] == "wake"
    total = round(sum(p["seconds"] for p in timeline["phases"]), 3)
    assert total == timeline["total_seconds"] == record["seconds"]
    return [p["name"] for p in timeline["phases"]]


def test_a_promoted_change_serves_on_the_other_port_and_the_sleeper_is_gone(
    launcher_factory: LauncherFactory,
) -> None:
    launcher, port, park_port, serving = serve_parked(launcher_factory)
    done = launch(launcher, "set", "svc", "max_num_seqs=2", "--tag", "two", "--apply", "--timeout-s", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    status = launcher.status()
    assert status["phase"] == "serving" and status["engine_pid"] != serving["engine_pid"]
    assert (
        not psutil.pid_exists(serving["engine_pid"])
        or psutil.Process(serving["engine_pid"]).status() == "zombie"
    )
    assert answers(park_port) and not answers(port)
    shown = launch(launcher, "status", "--profile", "svc")
    assert f"url: http://127.0.0.1:{park_port}" in shown.stdout
    again = launch(launcher, "set", "svc", "max_num_seqs=3", "--tag", "three", "--apply", "--timeout-s", "60")
    assert again.returncode == 0 and answers(port)  # and back: what serves alternates
    stop(launcher, 0)


@pytest.mark.parametrize(("fault", "why"), [("fail", "POST /wake_up answered 500"),
                                            ("hang", "POST /wake_up: no answer within 1 s")])  # fmt: skip
def test_a_wake_that_fails_or_hangs_is_named_and_last_good_starts_cold(
    launcher_factory: LauncherFactory, fault: str, why: str
) -> None:
    launcher, port, _, serving = serve_parked(launcher_factory, sim_wake_fault=fault,
                                               supervisor={"wake_timeout_s": 1})  # fmt: skip
    done = launch(
        launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply", "--timeout-s", "90"
    )
    assert done.returncode == 3, done.stdout + done.stderr
    failed = record(launcher, "wake_failed")
    assert failed["reason"].startswith(why) and wake_phases(failed) == ["wait_memory", "wake_up"]
    assert events(launcher)[-5:] == ["rollback", "start", "gates", "serving_last_good", "greedy_reference"]
    status = launcher.status()
    assert status["engine_pid"] != serving["engine_pid"] and answers(port)
    stop(launcher, 3)


def test_a_stale_prefix_cache_after_the_wake_is_reset_before_the_re_gate(
    launcher_factory: LauncherFactory,
) -> None:
    launcher, port, _, _ = serve_parked(launcher_factory, sim_wake_fault="stale-cache")
    done = launch(
        launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply", "--timeout-s", "60"
    )
    assert done.returncode == 3
    assert "woken" in events(launcher) and "wake_failed" not in events(launcher)
    assert answers(port)
    stop(launcher, 3)


def test_host_ram_that_cannot_hold_the_weights_stops_the_engine_as_before(
    launcher_factory: LauncherFactory,
) -> None:
    launcher, _, park_port, _ = serve_parked(launcher_factory, sim_weights_gib=4000, sim_gpu_memory_gib=20000)
    done = launch(launcher, "set", "svc", "max_num_seqs=2", "--tag", "two", "--apply", "--timeout-s", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = record(launcher, "park_skipped")
    assert skipped["reason"].startswith("host RAM:") and "4000.0 GiB of weights" in skipped["reason"]
    assert "parked" not in events(launcher)
    candidate = [r for r in launcher.history() if r["event"] == "start"][1]
    assert f"--port {park_port}" not in " ".join(candidate["argv"])  # stopped first: its port was free
    stop(launcher, 0)


def test_park_on_a_public_address_is_refused_before_anything_starts(tmp_path: Any) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    path = write_profile(profiles, "svc", free_port(), supervisor={"park": "sleep", "park_port": free_port()})
    path.write_text(path.read_text().replace("port = ", 'host = "0.0.0.0"\nport = ', 1))
    done = subprocess.run([str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(tmp_path / "state"),
                           "--profile", "svc"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "unauthenticated" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists()


def test_rollback_to_the_launch_kept_parked_wakes_it_instead_of_a_start(
    launcher_factory: LauncherFactory,
) -> None:
    launcher, port, park_port, serving = serve_parked(launcher_factory, supervisor={"keep_parked": True})
    done = launch(launcher, "set", "svc", "max_num_seqs=2", "--tag", "two", "--apply", "--timeout-s", "60")
    assert done.returncode == 0 and answers(park_port)
    back = launch(launcher, "rollback", "two", "--profile", "svc", "--timeout-s", "60")
    assert back.returncode == 0, back.stdout + back.stderr
    status = launcher.status()
    assert status["phase"] == "serving" and status["engine_pid"] == serving["engine_pid"]  # the first engine
    assert answers(port)
    woken = [r for r in launcher.history() if r["event"] == "woken"]
    assert woken[-1]["why"] == "back to the parked launch"
    starts = [r for r in launcher.history() if r["event"] == "start"]
    assert len(starts) == 2  # the way back started nothing
    stop(launcher, 0)
