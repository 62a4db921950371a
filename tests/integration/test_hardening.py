"""Hardening, with real processes: the real `launch` against `vllm-sim`. A gate that cannot pass a
dead engine, a stop that ends a gate at once, a full or immutable state dir that takes nothing
down, names checked before the disk is touched, and status/history closed on every way out."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests

from tests.launcher_run import LAUNCH, Launcher, free_port, write_profile

pytestmark = pytest.mark.integration

LEAK_GATE = {"windows": 5, "window_s": 0.5, "min_growth_mib": 100, "concurrency": 2,
             "prompt_paragraphs": 4, "max_tokens": 8}  # fmt: skip


def _launch(tmp_path: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    dirs = ["--profiles-dir", str(tmp_path / "profiles"), "--state-dir", str(tmp_path / "state")]
    argv = [str(LAUNCH), *dirs, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture
def launchers(tmp_path: Path) -> Iterator[Any]:
    made: list[Launcher] = []

    def make(profile: str = "svc") -> Launcher:
        launcher = Launcher(tmp_path / "profiles", tmp_path / "state", profile)
        made.append(launcher)
        return launcher

    (tmp_path / "profiles").mkdir(exist_ok=True)
    yield make
    leftovers = [item for launcher in made for item in launcher.cleanup()]
    assert leftovers == [], f"processes were left behind: {leftovers}"


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s}s: {what}")


def test_the_leak_gate_fails_an_engine_that_crashes_under_its_traffic(tmp_path: Path) -> None:
    """Was: exit 0 with `rss_mib [0.0 ×6]` and 16 failed requests."""
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path / "profiles", "crash", free_port(), args={"sim_crash_after_requests": 12},
                  gates={"memory_leak": LEAK_GATE}, order=["health", "memory_leak"])  # fmt: skip
    proc = _launch(tmp_path, "try", "--profile", "crash", "--json", "--skip-preflight")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    leak = next(g for g in json.loads(proc.stdout)["gates"] if g["name"] == "memory_leak")
    assert leak["verdict"] == "fail" and "engine" in leak["summary"], leak


def test_sigterm_ends_a_long_leak_window_at_once_and_the_status_is_closed(launchers: Any) -> None:
    """Was: honoured only when the windows end (106.6 s with defaults; never with a huge window_s)."""
    launcher = launchers()
    gates = {"memory_leak": {**LEAK_GATE, "window_s": 3600}}
    write_profile(launcher.profiles, "svc", free_port(), gates=gates, order=["health", "memory_leak"])
    launcher.start()
    _wait(lambda: _gate_running(launcher, "memory_leak"), 60, "memory_leak is running")
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit(timeout_s=120) == 0  # the window alone would have taken an hour
    status = launcher.status()
    assert status["phase"] == "stopped" and status["engine_pid"] is None, status
    assert launcher.history()[-1]["event"] == "stopped", launcher.history()[-1]


def _gate_running(launcher: Launcher, name: str) -> bool:
    return re.search(rf"gate \d+/\d+ {name}\b", launcher.output()) is not None


def test_a_killed_launcher_is_closed_by_the_next_start_and_its_temp_files_removed(launchers: Any) -> None:
    first = launchers()
    write_profile(first.profiles, "svc", free_port(), args={"sim_hang_at": "capture"})
    first.start()
    first.wait_phase("gating", timeout_s=60)
    assert first.proc is not None
    first.proc.send_signal(signal.SIGKILL)
    first.wait_exit()
    dead_pid = first.proc.pid
    stray = first.status_path.parent / f".status.json.{dead_pid}.abc123.tmp"
    stray.write_text("half")
    _wait(lambda: not _engine_alive(first), 30, "the killed launcher's engine ended")
    write_profile(first.profiles, "svc", free_port())
    second = launchers()
    second.start()
    second.wait_phase("serving", timeout_s=90)
    closed = [r for r in second.history() if r.get("found_by") == "next start"]
    assert closed and closed[0]["during"] == "gating" and closed[0]["launcher_pid"] == dead_pid
    assert not stray.exists()
    second.signal(signal.SIGTERM)
    assert second.wait_exit() == 0


def _engine_alive(launcher: Launcher) -> bool:
    return any(psutil.pid_exists(pid) for pid in launcher.engine_pids())


def test_path_traversal_and_unknown_names_write_nothing(tmp_path: Path) -> None:
    """Was: `--profile ../../outside/x` exited 2 but had created outside/x/launcher.lock."""
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path / "profiles", "loop", free_port())
    (tmp_path / "profiles" / "loop.toml").write_text('extends = "loop"\n')
    for name in ("../../outside/x", str(tmp_path / "abs"), "x" * 300, "nope", "loop", "ok\n"):
        proc = _launch(tmp_path, "--profile", name, timeout_s=60)
        assert proc.returncode == 2, (name, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.startswith("error:"), proc.stderr
    assert not (tmp_path / "state").exists() and not (tmp_path / "outside").exists()
    assert not (tmp_path / "abs").exists()


@contextlib.contextmanager
def _tiny_tmpfs(path: Path, size: str = "256k") -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(directory: Path) -> Path:
    """Fill the file system of `directory` to the last byte; returns the filler to delete later."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096) > 0:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_state_dir_on_reload_keeps_serving_and_writes_catch_up(launchers: Any, tmp_path: Path) -> None:
    """Was: SIGHUP with a full state dir → traceback, exit 1, nothing serving."""
    with _tiny_tmpfs(tmp_path / "state", size="4m"):
        launcher = launchers()
        port = free_port()
        write_profile(launcher.profiles, "svc", port)
        launcher.start()
        first_engine = launcher.wait_phase("serving", timeout_s=90)["engine_pid"]
        write_profile(launcher.profiles, "svc", port, args={"max_num_seqs": 2})  # a real change to reload
        filler = _fill(launcher.state)
        launcher.signal(signal.SIGHUP)  # the reload runs against a full disk: stop, start, gate, promote
        assert launcher.proc is not None
        _wait(lambda: _new_engine_serves(launcher, first_engine, port), 90, "the reloaded engine serves")
        assert launcher.proc.poll() is None, launcher.output()
        filler.unlink()
        _wait(lambda: [r["event"] for r in launcher.history()].count("reload") == 1, 30, "history caught up")
        launcher.wait_phase("serving", timeout_s=30)
        launcher.signal(signal.SIGTERM)
        assert launcher.wait_exit() == 0
        shutil.rmtree(launcher.state / "profiles", ignore_errors=True)


def _new_engine_serves(launcher: Launcher, old_pid: int, port: int) -> bool:
    assert launcher.proc is not None
    children = [c.pid for c in psutil.Process(launcher.proc.pid).children()]
    return any(pid != old_pid for pid in children) and _serves(port)


def _serves(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def test_set_on_a_full_or_immutable_profiles_dir_exits_2_and_changes_nothing(tmp_path: Path) -> None:
    """Was: traceback, exit 1; ENOSPC between the `.bak` and the profile left the `.bak` behind."""
    profiles = tmp_path / "profiles"
    with _tiny_tmpfs(profiles, size="64k"):
        write_profile(profiles, "svc", free_port())
        before = (profiles / "svc.toml").read_bytes()
        filler = _fill(profiles)
        proc = _launch(tmp_path, "set", "svc", "max_num_seqs=2", "--tag", "t1", timeout_s=60)
        assert proc.returncode == 2 and "nothing was changed" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert (profiles / "svc.toml").read_bytes() == before
        assert sorted(p.name for p in profiles.iterdir()) == ["filler", "svc.toml"]
        filler.unlink()
        again = _launch(tmp_path, "set", "svc", "max_num_seqs=2", "--tag", "t1", timeout_s=60)
        assert again.returncode == 0, again.stderr  # the same tag works once there is room
    _immutable_dir_refuses_set(tmp_path)


def _immutable_dir_refuses_set(tmp_path: Path) -> None:
    profiles = tmp_path / "immutable"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    if subprocess.run(["chattr", "+i", str(profiles)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not permitted here")
    try:
        argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(tmp_path / "state"),
                "set", "svc", "max_num_seqs=2", "--tag", "t2"]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "nothing was changed" in proc.stderr, proc.stderr
        assert sorted(p.name for p in profiles.iterdir()) == ["svc.toml"]
    finally:
        subprocess.run(["chattr", "-i", str(profiles)], check=False)


def test_set_on_a_symlinked_profile_keeps_the_link(tmp_path: Path) -> None:
    """Was: `set` replaced the symlink with a file."""
    (tmp_path / "profiles").mkdir()
    real = tmp_path / "elsewhere"
    real.mkdir()
    write_profile(real, "svc", free_port())
    link = tmp_path / "profiles" / "svc.toml"
    link.symlink_to(real / "svc.toml")
    proc = _launch(tmp_path, "set", "svc", "max_num_seqs=2", "--tag", "t1", timeout_s=60)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and "max_num_seqs = 2" in (real / "svc.toml").read_text()
    assert [p.name for p in real.iterdir() if p.name.endswith(".tmp")] == []
    os.unlink(link)


def _status_is(tmp_path: Path, code: int, headline: str) -> bool:
    shown = _launch(tmp_path, "status", "--profile", "svc", timeout_s=60)
    return shown.returncode == code and shown.stdout.startswith(headline)


def _said(launcher: Launcher, event: str) -> list[str]:
    """The launcher's journal lines (its stderr, JSON lines here) of one event."""
    return [line for line in launcher.output().splitlines() if f'"event": "{event}"' in line]


def _serving(launcher: Launcher, tmp_path: Path) -> None:
    """Serving, as `launch status` says, and its record on the loop's pace: the writes that fail next
    break a promise (a launcher from before the pace existed writes no `confirmed_at`: no wait)."""
    launcher.wait_phase("serving", timeout_s=90)
    _wait(lambda: _status_is(tmp_path, 0, "svc: serving\n"), 60, "launch status says serving")
    launcher.wait_for(lambda s: s.get("confirm_every_s") == 1 or "confirmed_at" not in s, 60)


def _confirmed_at_its_pace(launcher: Launcher) -> None:
    """The serve loop rewrites the record at the profile's canary_interval_s (1 s here), again and again."""
    seen = [launcher.wait_for(lambda s: s.get("confirm_every_s") == 1, 60)["confirmed_at"]]
    for _ in range(2):
        seen.append(launcher.wait_for(lambda s: s.get("confirmed_at") not in seen, 60)["confirmed_at"])


def test_a_full_state_dir_makes_status_unknown_not_serving(launchers: Any, tmp_path: Path) -> None:
    """Was: status.json could not be rewritten and `launch status` said `serving`, exit 0, for as
    long as the disk stayed full — an engine wedged behind it included."""
    with _tiny_tmpfs(tmp_path / "state", size="4m"):
        launcher = launchers()
        port = free_port()
        write_profile(launcher.profiles, "svc", port, supervisor={"canary_interval_s": 1})
        launcher.start()
        _serving(launcher, tmp_path)
        filler = _fill(launcher.state)
        unknown = "svc: unknown: the launcher could not write its state: no space left on "
        _wait(lambda: _status_is(tmp_path, 4, unknown), 120, "launch status says unknown")
        shown = _launch(tmp_path, "status", "--profile", "svc", "--json")
        entry = json.loads(shown.stdout)["profiles"][0]
        assert shown.returncode == 4 and entry["phase"] == "unknown" and entry["serving"] is False, entry
        assert entry["stale"] == f"no space left on {launcher.status_path.parent}", entry
        assert launcher.proc is not None and launcher.proc.poll() is None and _serves(port)  # still serving
        said = _said(launcher, "state.status_unwritable")
        assert len(said) == 1, said  # once, however many ticks could not write it
        assert f"cannot write {launcher.status_path}: [Errno 28] No space left on device" in said[0]
        filler.unlink()
        _wait(lambda: _status_is(tmp_path, 0, "svc: serving\n"), 60, "launch status believes it again")
        _wait(
            lambda: len(_said(launcher, "state.status_written")) == 1, 30, "the journal hears it is written"
        )
        assert len(_said(launcher, "state.status_unwritable")) == 1
        _confirmed_at_its_pace(launcher)
        assert "Traceback" not in launcher.output()
        launcher.signal(signal.SIGTERM)
        assert launcher.wait_exit() == 0
        shutil.rmtree(launcher.state / "profiles", ignore_errors=True)


def test_a_profile_dir_that_takes_no_write_makes_status_unknown(launchers: Any, tmp_path: Path) -> None:
    """The same with a directory the launcher may not write (chattr +i as root, else chmod)."""
    launcher = launchers()
    write_profile(launcher.profiles, "svc", free_port(), supervisor={"canary_interval_s": 1})
    launcher.start()
    _serving(launcher, tmp_path)
    directory = launcher.status_path.parent
    with _unwritable(directory) as why:
        unknown = f"svc: unknown: the launcher could not write its state: {directory} is not writable"
        _wait(lambda: _status_is(tmp_path, 4, unknown), 120, "launch status says unknown")
        said = _said(launcher, "state.status_unwritable")
        assert len(said) == 1 and f"cannot write {launcher.status_path}: {why}" in said[0], said
    _wait(lambda: _status_is(tmp_path, 0, "svc: serving\n"), 60, "launch status believes it again")
    assert "Traceback" not in launcher.output()
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


@contextlib.contextmanager
def _unwritable(directory: Path) -> Iterator[str]:
    """`directory` takes no new file while open; yields the error a write meets."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield "[Errno 13] Permission denied"
        finally:
            directory.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not permitted here, and root writes any mode")
    try:
        yield "[Errno 1] Operation not permitted"
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=False)
