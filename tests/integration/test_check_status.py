"""`launch check` and `launch status` exit codes against running, stopped, failing and unknown
profiles: the real `launch` against the real simulator, each run as a process like a probe would."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from basis.clock import epoch_of
from tests.conftest import tree_snapshot
from tests.launcher_run import LAUNCH, Launcher, append_table, free_port, write_profile
from tests.simserver import running_sim

pytestmark = pytest.mark.integration


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    (tmp_path / "profiles").mkdir()
    made = Launcher(tmp_path / "profiles", tmp_path / "state", "svc")
    yield made
    if made.proc is not None and made.proc.poll() is None:
        made.signal(signal.SIGTERM)  # our own launcher, by pid: it stops its engine's group
        made.wait_exit()
    assert made.cleanup() == [], "processes were left behind"


def launch(launcher: Launcher, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def status_json(launcher: Launcher, *args: str) -> tuple[int, dict[str, Any]]:
    done = launch(launcher, "status", "--json", *args)
    return done.returncode, json.loads(done.stdout)


LOOP_OWN = ("confirmed_at", "confirm_every_s", "watch")


def unconfirmed(status: dict[str, Any]) -> dict[str, Any]:
    """The record less what the serve loop itself rewrites meanwhile: its confirmation at the watch's
    pace and the watch's verdict (on a loaded host a canary may be late, and retried)."""
    return {k: v for k, v in status.items() if k not in LOOP_OWN}


def test_serving_profile_passes_check_and_status_says_what_serves(launcher: Launcher) -> None:
    port = free_port()
    write_profile(launcher.profiles, "svc", port)
    launcher.start()
    serving = launcher.wait_phase("serving")
    before = (tree_snapshot(launcher.profiles), launcher.history(), unconfirmed(launcher.status()))
    check = launch(launcher, "check", "--profile", "svc")
    # check changes nothing; the serve loop's own refresh may come meanwhile
    assert (tree_snapshot(launcher.profiles), launcher.history(), unconfirmed(launcher.status())) == before
    assert check.returncode == 0, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    assert lines[0].startswith("PASS  health") and "serving sim" in lines[0]
    assert lines[1].startswith("PASS  tool_call") and "ALL_PASS (auto)" in lines[1]  # one case: a probe
    assert lines[2].startswith(f"check svc at http://127.0.0.1:{port}: passed")
    full = json.loads(launch(launcher, "check", "--profile", "svc", "--full", "--json").stdout)
    assert full["passed"] is True and "ALL_PASS (auto, required)" in full["gates"][1]["summary"]
    code, payload = status_json(launcher, "--profile", "svc")
    assert code == 0
    [entry] = payload["profiles"]
    assert entry["phase"] == "serving" and entry["serving"] is True
    assert entry["url"] == f"http://127.0.0.1:{port}" and entry["served_model"] == "sim"
    assert entry["fingerprint"] == serving["serving_fingerprint"] and entry["uptime_s"] >= 0
    assert entry["profile_fingerprint"] == entry["fingerprint"]  # the file as written serves
    assert [g["name"] for g in entry["gates"]] == ["kernel_marker", "graph_capture", "health", "tool_call"]
    code, every = status_json(launcher)
    assert code == 0 and [e["profile"] for e in every["profiles"]] == ["svc"]  # the same shape
    assert launch(launcher, "status").returncode == 0


def test_serving_last_good_has_its_own_exit_code_and_the_drift_is_shown(launcher: Launcher) -> None:
    port = free_port()
    path = write_profile(launcher.profiles, "svc", port, args={"sim_model_max_len": 4096})
    append_table(path, "env", {"VLLM_PROCESS_NAME_PREFIX": "CheckLG"})  # foreign orphans: not ours
    launcher.start()
    good = launcher.wait_phase("serving")
    done = launch(
        launcher, "set", "svc", "max_model_len=8192", "--tag", "long", "--apply", "--timeout-s", "60"
    )
    assert done.returncode == 3, done.stdout + done.stderr  # rejected by vLLM's own config check
    code, payload = status_json(launcher, "--profile", "svc")
    [entry] = payload["profiles"]
    assert code == 6 and entry["phase"] == "serving_last_good"  # serving, but not what the file says
    assert entry["fingerprint"] == good["serving_fingerprint"] and entry["url"] == f"http://127.0.0.1:{port}"
    human = launch(launcher, "status", "--profile", "svc")
    assert human.returncode == 6
    drift = (
        f"file: the profile file renders {entry['profile_fingerprint']}, but {entry['fingerprint']} serves: "
    )
    assert drift in human.stdout and "`launch --profile svc --dry-run` shows the difference" in human.stdout
    rolled_back_pid = entry["engine_pid"]
    # an engine that exits before the gates is its own verdict, led by vLLM's sentence (issue 35, point 2)
    reason = "rejected at engine_start: Value error, User-specified max_model_len (8192)"
    assert reason in entry["rollback_reason"], entry["rollback_reason"]
    assert entry["profile_fingerprint"] not in (None, entry["fingerprint"])  # the change did not serve
    # The file keeps the rejected change, and set says so with the way back; going back restarts nothing.
    assert "the file keeps the change: svc.toml is what the next start of 'svc' serves" in done.stdout
    assert "launch rollback long --profile svc (it restarts nothing" in done.stdout
    back = launch(launcher, "rollback", "long", "--profile", "svc", "--timeout-s", "60")
    assert back.returncode == 0 and f"already serving {good['serving_fingerprint']}" in back.stdout, (
        back.stdout
    )
    code, payload = status_json(launcher, "--profile", "svc")
    [entry] = payload["profiles"]
    assert entry["profile_fingerprint"] == entry["fingerprint"] == good["serving_fingerprint"]
    assert entry["phase"] == "serving" and code == 0  # the file is what serves again: the phase cleared
    assert entry["engine_pid"] == rolled_back_pid  # the same engine: nothing was restarted
    assert "file:" not in launch(launcher, "status", "--profile", "svc").stdout


def test_status_wait_blocks_until_the_start_has_a_verdict(launcher: Launcher) -> None:
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_startup_speed": 20})  # ~3 s to load
    launcher.start()
    launcher.wait_for(lambda s: s.get("phase") in ("starting", "gating"))
    waited = launch(launcher, "status", "--profile", "svc", "--wait", "--timeout-s", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert waited.stdout.startswith("svc: serving")
    assert "waiting" not in waited.stderr and "\r" not in waited.stderr  # stderr is no terminal here


def test_status_wait_on_a_terminal_says_what_it_waits_for_on_one_line(launcher: Launcher) -> None:
    """Was: `status --wait` printed nothing while it waited (issue 44). On a terminal, one line on
    stderr, rewritten with `\r`, names the profile, its phase and the launch it judges; it is
    cleared before the answer, which stays on stdout."""
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_startup_speed": 20})  # ~3 s to load
    launcher.start()
    launcher.wait_for(lambda s: s.get("phase") in ("starting", "gating"))
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "status", "--profile", "svc", "--wait", "--timeout-s", "120"]  # fmt: skip
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=terminal, text=True, timeout=150)
        os.close(terminal)
        seen = _drain(controller)
    finally:
        os.close(controller)
    assert done.returncode == 0 and done.stdout.startswith("svc: serving"), done.stdout
    drawn = [text for text in seen.split("\r") if text.strip()]
    assert drawn and all(text.startswith("waiting ") for text in drawn), seen
    shown = r"waiting \d+ s of 120: svc (starting|gating) \(candidate svc@[0-9a-f]{16}\)"
    assert re.search(shown, seen), seen
    assert "\n" not in seen.replace("\r\n", "") and seen.endswith("\r")  # one line, cleared at the end


def _drain(controller: int) -> str:
    """What the command wrote to its terminal (the writer has closed: read until EOF or EIO)."""
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # Linux answers EIO once the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def test_status_wait_gives_up_at_its_timeout_saying_what_it_still_does(launcher: Launcher) -> None:
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_hang_at": "loading"})
    launcher.start()
    launcher.wait_for(lambda s: s.get("phase") in ("starting", "gating"))
    waited = launch(launcher, "status", "--profile", "svc", "--wait", "--timeout-s", "1")
    assert waited.returncode == 3
    assert "svc: still gating after 1 s" in waited.stderr or "svc: still starting after 1 s" in waited.stderr


def test_stopped_profile_fails_check_and_status_exits_3(launcher: Launcher) -> None:
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    launcher.wait_phase("serving")
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    check = launch(launcher, "check", "--profile", "svc", "--json")
    report = json.loads(check.stdout)
    assert check.returncode == 1 and report["passed"] is False
    assert [g["verdict"] for g in report["gates"]] == ["fail", "skip"]
    assert "no answer yet" in report["gates"][0]["summary"]
    code, payload = status_json(launcher, "--profile", "svc")
    assert code == 3 and payload["profiles"][0]["phase"] == "stopped"
    assert payload["profiles"][0]["serving"] is False and payload["profiles"][0]["url"] is None


def test_failed_profile_status_exits_3(launcher: Launcher) -> None:
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_capture_fallback": True})
    launcher.start()
    assert launcher.wait_exit(timeout_s=60) == 1
    code, payload = status_json(launcher, "--profile", "svc")
    assert code == 3 and payload["profiles"][0]["phase"] == "failed"
    assert launch(launcher, "status").returncode == 3


def test_check_fails_a_server_whose_tool_calls_are_wrong(launcher: Launcher) -> None:
    with running_sim(["--served-model-name", "sim", "--enable-auto-tool-choice", "--tool-call-parser",
                      "hermes", "--sim-tool-fault", "malformed"]) as sim:  # fmt: skip
        write_profile(launcher.profiles, "svc", sim.port)
        check = launch(launcher, "check", "--profile", "svc")
        assert check.returncode == 1
        assert check.stdout.startswith("PASS  health") and "FAIL  tool_call" in check.stdout
        assert "not valid JSON" in check.stdout
        health_only = launch(launcher, "check", "--profile", "svc", "--gates", "health", "--url", sim.url)
        assert health_only.returncode == 0, health_only.stdout


def test_check_fails_a_server_serving_another_model(launcher: Launcher) -> None:
    with running_sim(["--served-model-name", "other"]) as sim:
        write_profile(launcher.profiles, "svc", free_port())
        check = launch(launcher, "check", "--profile", "svc", "--url", sim.url, "--gates", "health")
        assert check.returncode == 1
        assert "server serves ['other'], profile expects ['sim']" in check.stdout


def test_unknown_profile(launcher: Launcher) -> None:
    write_profile(launcher.profiles, "svc", free_port())
    code, payload = status_json(launcher, "--profile", "nosuch")
    assert code == 4 and payload["profiles"] == [
        {"profile": "nosuch", "phase": "unknown", "serving": False, "url": None, "engine_url": None,
         "served_model": None, "uptime_s": None, "fingerprint": None, "profile_fingerprint": None,
         "gates": [], "stale": None}
    ]  # fmt: skip
    assert launch(launcher, "status", "--profile", "nosuch").returncode == 4
    code, payload = status_json(launcher, "--profile", "svc")  # a profile that never ran
    assert code == 3 and payload["profiles"][0]["phase"] == "never_run"
    check = launch(launcher, "check", "--profile", "nosuch")
    assert check.returncode == 2 and "no profile 'nosuch'" in check.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--gates", "helth"], "did you mean health?"),
        (["--gates", "graph_capture"], "reads the start's log"),
        (["--gates", ","], "--gates is empty"),
        (["--url", "ftp://host:1"], "is not an http(s) URL"),
        (["--url", "http://host:99999"], "is not a URL"),
        (["--url", "http://host:1/v1"], "has a path"),
        (["--timeout-s", "0"], "Invalid value"),
        (["--wait-s", "-1"], "Invalid value"),
    ],
)
def test_check_refuses_bad_input_with_exit_2(launcher: Launcher, args: list[str], expected: str) -> None:
    write_profile(launcher.profiles, "svc", free_port())
    done = launch(launcher, "check", "--profile", "svc", *args)
    assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_status_refuses_a_hostile_name(launcher: Launcher) -> None:
    done = launch(launcher, "status", "--profile", "../../etc")
    assert done.returncode == 2 and "invalid profile name" in done.stderr and "Traceback" not in done.stderr


def test_status_of_a_state_dir_where_nothing_ran(launcher: Launcher) -> None:
    (launcher.state / "profiles" / "ghost").mkdir(parents=True)  # a lock dir, never a status
    code, payload = status_json(launcher)
    assert code == 3 and payload["profiles"] == []  # not serving; and no profile is "unknown"
    done = launch(launcher, "status")
    assert done.returncode == 3 and done.stdout.startswith("nothing has run yet")


def test_the_prometheus_textfile_follows_a_promotion_and_a_rollback(launcher: Launcher) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    launcher.wait_phase("serving")
    done = launch(
        launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply", "--timeout-s", "60"
    )
    assert done.returncode == 3, done.stdout + done.stderr
    rejected = next(r for r in launcher.history() if r["event"] == "rejected")
    text = (launcher.state / "metrics" / "vllm_gate_svc.prom").read_text()
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip

    def value(name: str, **labels: str) -> float:
        return found[(name, tuple(sorted({"profile": "svc", **labels}.items())))]

    assert value("vllm_gate_phase", phase="serving_last_good") == 1
    assert value("vllm_gate_promotions_total") == 1 and value("vllm_gate_rollbacks_total") == 1
    assert value("vllm_gate_engine_starts_total") == 3  # production, the candidate, last-good
    assert value("vllm_gate_last_rejected_info", fingerprint=rejected["fingerprint"]) == 1
    assert value("vllm_gate_gate_passed", gate="tool_call") == 1  # last-good's own chain passed
    assert value("vllm_gate_serving") == 1
    # the counters were created with the history, not at this rewrite (issue 44)
    history = launcher.history()
    assert value("vllm_gate_promotions_created") == epoch_of(history[0]["ts"])
    # the last start (last-good's) by phase: its start and gates records, vLLM's own time to ready
    start = [r for r in history if r["event"] == "start"][-1]
    gates = [r for r in history if r["event"] == "gates"][-1]
    assert gates["startup_seconds"] is not None
    spawned_to_verdict = round(epoch_of(gates["ts"]) - epoch_of(start["ts"]), 3)  # type: ignore[operator]
    assert value("vllm_gate_start_seconds", phase="total") == spawned_to_verdict
    assert value("vllm_gate_start_seconds", phase="ready") == gates["startup_seconds"]


def test_status_wait_right_after_a_start_waits_for_its_first_status(launcher: Launcher) -> None:
    """Was: `launch --profile svc & launch status --wait` exited 3, "nothing has run yet", while the
    launcher was still importing. A launcher started just before is given its time to appear."""
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    waited = launch(launcher, "status", "--profile", "svc", "--wait", "--timeout-s", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert waited.stdout.startswith("svc: serving")


HOLDER = """
import sys
from pathlib import Path
from launcher.state.store import StateStore
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.status import Phase, StatusBoard

store = StateStore(Path(sys.argv[1]))
with ProfileLock(store, "svc"):  # a launcher between its lock and its first status
    print("locked", flush=True)
    sys.stdin.readline()
    StatusBoard(store.status_path("svc"), "svc").update(phase=Phase.SERVING, serving_profile="svc")
    sys.stdin.readline()
"""


def test_a_launcher_that_holds_the_profile_but_wrote_no_status_yet_is_starting(launcher: Launcher) -> None:
    """Between its lock and its first status a launcher is starting, not "never run": `status` says
    so, and `status --wait` waits for the status it will write."""
    write_profile(launcher.profiles, "svc", free_port())
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(launcher.state)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == "locked\n"
        shown = launch(launcher, "status", "--profile", "svc")
        assert shown.returncode == 3, shown.stdout + shown.stderr
        assert shown.stdout.startswith("svc: starting\n"), shown.stdout
        assert f"launcher pid {holder.pid} holds the profile and has written no status yet" in shown.stdout
        argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
                "status", "--profile", "svc", "--wait", "--timeout-s", "120"]  # fmt: skip
        waiting = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        holder.stdin.write("write the status\n")
        holder.stdin.flush()
        out, err = waiting.communicate(timeout=150)
        assert waiting.returncode == 0, out + err
        assert out.startswith("svc: serving")
    finally:
        holder.kill()
        holder.wait(timeout=10)
