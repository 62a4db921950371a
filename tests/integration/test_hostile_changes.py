"""The last hostile inputs of issue 33, each with real processes (the real `launch`, `vllm-sim`):
two changes to one profile at once, a value nested 50,000 deep, a gate listed twice, links planted
in the state dir, a FIFO where a state file should be, a profile that links out of its dir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH, Launcher, free_port, write_profile

pytestmark = pytest.mark.integration


def _launch(
    profiles: Path, state: Path, *args: str, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


def _popen(profiles: Path, state: Path, *args: str) -> subprocess.Popen[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Launcher]:
    """A launcher serving profile `svc` on the simulator, with a snapshot `svc.toml.bak_orig`."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    path = write_profile(profiles, "svc", free_port())
    shutil.copy(path, path.with_name("svc.toml.bak_orig"))
    launcher = Launcher(profiles, tmp_path / "state", "svc")
    launcher.start()
    launcher.wait_phase("serving", timeout_s=90)
    yield launcher
    if launcher.proc is not None and launcher.proc.poll() is None:
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit(60)
    assert launcher.cleanup() == [], "processes were left behind"


def _holder_pid(lock: Path) -> int | None:
    try:
        return int(json.loads(lock.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def test_a_rollback_sent_while_a_set_applies_is_refused_naming_it(serving: Launcher) -> None:
    """Was: both exited 0 and said the launcher serves the profile as it is, but only the last write
    served: the set's max_num_seqs=2 was silently lost."""
    set_args = ("set", "svc", "max_num_seqs=2", "--tag", "seqs", "--apply", "--timeout-s", "90")
    first = _popen(serving.profiles, serving.state, *set_args)
    lock = serving.state / "profiles" / "svc" / "change.lock"
    deadline = time.monotonic() + 60
    while _holder_pid(lock) != first.pid:  # the set holds the profile's change from here to its verdict
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.01)
    # Held still while the rollback is sent: a stopped process keeps its flock, so the rollback meets
    # the set in the middle of its change however slowly this host starts a second `launch`.
    first.send_signal(signal.SIGSTOP)
    try:
        second = _launch(
            serving.profiles, serving.state, "rollback", "orig", "--profile", "svc", "--timeout-s", "90"
        )
    finally:
        first.send_signal(signal.SIGCONT)
    out, _ = first.communicate(timeout=120)
    assert second.returncode == 4, second.stdout + second.stderr
    assert "another change to profile 'svc' is in progress" in second.stderr
    assert f"`launch set svc (max_num_seqs) --apply` (pid {first.pid})" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, out
    assert "reloaded: the launcher serves the profile as it is now" in out
    assert "max_num_seqs = 2" in (serving.profiles / "svc.toml").read_text()  # the rollback wrote nothing
    last_good = json.loads((serving.state / "profiles" / "svc" / "last_good.json").read_text())
    argv = last_good["argv"]
    assert argv[argv.index("--max-num-seqs") + 1] == "2"  # what serves is what the set reported


def test_two_changes_sent_at_the_same_moment_are_ordered(serving: Launcher) -> None:
    """Started together: one holds the change, the other is refused or runs after it; never both
    reporting success for a change that does not serve."""
    procs = [
        _popen(serving.profiles, serving.state, "set", "svc", "max_num_seqs=3", "--tag", "three", "--apply"),
        _popen(serving.profiles, serving.state, "rollback", "orig", "--profile", "svc"),
    ]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) in ([0, 4], [0, 0]), outs
    text = (serving.profiles / "svc.toml").read_text()
    argv = json.loads((serving.state / "profiles" / "svc" / "last_good.json").read_text())["argv"]
    served = argv[argv.index("--max-num-seqs") + 1]
    assert served == str(tomllib.loads(text)["args"]["max_num_seqs"]), (outs, text)  # whoever won
    for code, out in zip(codes, outs, strict=True):
        if code == 4:
            assert "another change to profile 'svc' is in progress" in out, out


def test_a_value_nested_50000_deep_is_bad_input(tmp_path: Path) -> None:
    """Was: RecursionError, exit 70 and a bug report."""
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    write_profile(profiles, "good", free_port())
    before = _tree(tmp_path)
    deep = "[" * 50_000 + "]" * 50_000
    for key in ("compilation_config", "env.X", "engine.model"):
        result = _launch(profiles, state, "set", "good", f"{key}={deep}", "--tag", "deep")
        assert result.returncode == 2, result.stderr[-2000:]
        assert "nested" in result.stderr and key in result.stderr and "Traceback" not in result.stderr
    wide = "x" * 120_000  # one argv string holds at most 128 KiB
    result = _launch(profiles, state, "set", "good", f"tool_call_parser={wide}", "--tag", "wide")
    assert result.returncode == 2 and "characters" in result.stderr and len(result.stderr) < 2000
    assert _tree(tmp_path) == before  # nothing written, not even a bug report


def test_a_gate_listed_twice_in_gates_order_is_refused(tmp_path: Path) -> None:
    """Was: accepted; the chain ran the health gate twice."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    write_profile(profiles, "dup", free_port(), order=["kernel_marker", "health", "tool_call", "health"])
    result = _launch(profiles, tmp_path / "state", "--profile", "dup", "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "gates.order: gate 'health' is listed 2 times" in result.stdout + result.stderr
    assert not (tmp_path / "state").exists()


def test_links_planted_in_the_state_dir_are_never_followed(tmp_path: Path) -> None:
    """Was: `STATE/history.jsonl -> elsewhere` was appended to outside the state dir, and a
    `status.json` link was read through."""
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    outside = tmp_path / "outside.txt"
    outside.write_text("not the launcher's\n")
    state.mkdir()
    (state / "history.jsonl").symlink_to(outside)
    result = _launch(profiles, state, "try", "--profile", "svc", timeout_s=180)
    assert outside.read_text() == "not the launcher's\n", result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (state / "history.jsonl").unlink()
    status = state / "profiles" / "svc" / "status.json"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.unlink(missing_ok=True)
    status.symlink_to(outside)
    result = _launch(profiles, state, "status", "--profile", "svc")
    assert result.returncode == 2 and str(status) in result.stderr and "symbolic link" in result.stderr
    assert outside.read_text() == "not the launcher's\n"


def test_a_fifo_in_place_of_a_state_file_never_hangs_a_command(tmp_path: Path) -> None:
    """Was: `launch status` blocked forever opening a FIFO planted as status.json."""
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    status = state / "profiles" / "svc" / "status.json"
    status.parent.mkdir(parents=True)
    os.mkfifo(status)
    result = _launch(profiles, state, "status", "--profile", "svc", timeout_s=30)
    assert result.returncode == 2 and "not a regular file" in result.stderr, result.stderr


def test_a_profile_linked_out_of_its_dir_is_named_in_the_dry_run(tmp_path: Path) -> None:
    """Was: accepted silently; the operator could not tell which file `launch set` would write."""
    profiles, elsewhere = tmp_path / "profiles", tmp_path / "config-repo"
    profiles.mkdir()
    elsewhere.mkdir()
    write_profile(elsewhere, "svc", free_port())
    (profiles / "svc.toml").symlink_to(elsewhere / "svc.toml")
    result = _launch(profiles, tmp_path / "state", "--profile", "svc", "--dry-run")
    assert result.returncode == 0, result.stderr
    named = f"is a link to {elsewhere / 'svc.toml'}, outside {profiles}"
    assert named in result.stdout + result.stderr
    result = _launch(profiles, tmp_path / "state", "set", "svc", "max_num_seqs=4", "--tag", "t", "--dry-run")
    assert result.returncode == 0 and named in result.stdout, result.stdout
