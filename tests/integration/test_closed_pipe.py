"""A reader that closes the pipe (`launch logs demo | head -5`) has seen enough: `launch` stops
quietly with the shell's 141, prints no error and writes no bug report.

Each case is a real shell pipeline, `launch … | head -1`, with enough output that the launcher is
still writing when `head` has gone. `PIPESTATUS` gives launch's own exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.launcher_run import LAUNCH, free_port, write_profile

CLOSED_PIPE = 141


def pipeline(tmp_path: Path, command: str, *, stderr_too: bool = False) -> tuple[int, str]:
    """Run `launch … | head -1`; return launch's exit code and its stderr."""
    err = tmp_path / "launch.err"
    err.write_text("")
    redirect = "2>&1" if stderr_too else f'2>"{err}"'
    script = f'{command} {redirect} | head -1 >/dev/null; exit "${{PIPESTATUS[0]}}"'
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    done = subprocess.run(["bash", "-c", script], env=env, timeout=120, check=False)
    return done.returncode, err.read_text(encoding="utf-8", errors="replace")


def no_bug_report(tmp_path: Path, state: Path) -> bool:
    return not (state / "bug-reports").exists() and not list(
        (tmp_path / "tmp").glob("vllm-gate-bug-reports/*")
    )


@pytest.fixture
def busy_state(tmp_path: Path) -> Path:
    """A state dir whose history and engine log are far longer than a pipe buffer."""
    state = tmp_path / "state"
    record = {"event": "try", "profile": "demo", "fingerprint": "c83f388e24ed7ced", "passed": True,
              "label": "candidate demo@c83f388e24ed7ced " + "x" * 200}  # fmt: skip
    lines = [
        json.dumps({**record, "ts": f"2026-12-03T11:{i // 60 % 60:02d}:{i % 60:02d}Z"}) for i in range(3000)
    ]
    state.mkdir()
    (state / "history.jsonl").write_text("\n".join(lines) + "\n")
    log = state / "profiles" / "demo" / "logs" / "engine.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "".join(
            f"(APIServer pid=7) INFO 12-03 11:29:{i % 60:02d} [api.py:1] line {i}\n" for i in range(20000)
        )
    )
    return state


@pytest.mark.parametrize(
    "args",
    [
        ["history", "--json", "--limit", "3000"],
        ["history", "--limit", "3000"],
        ["logs", "demo"],
        ["logs", "demo", "--since", "1000d"],
    ],
    ids=["history-json", "history", "logs", "logs-since"],
)
def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path, busy_state: Path, args: list[str]) -> None:
    log = busy_state / "profiles" / "demo" / "logs" / "engine.log"
    words = " ".join(a.format(log=log) for a in args)
    code, err = pipeline(tmp_path, f'"{LAUNCH}" --state-dir "{busy_state}" {words}')
    assert code == CLOSED_PIPE, err
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err, err
    assert no_bug_report(tmp_path, busy_state)


def into_a_closed_pipe(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Run launch with stdout a pipe whose reader has already gone: short outputs too meet it."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    try:
        done = subprocess.run([str(LAUNCH), *args], stdout=write_end, stderr=subprocess.PIPE, env=env,
                              timeout=120, check=False, text=True)  # fmt: skip
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


def test_help_status_parse_log_and_the_dry_run_into_a_closed_pipe(tmp_path: Path, busy_state: Path) -> None:
    state = tmp_path / "state"
    shipped = Path(__file__).resolve().parents[2] / "profiles"
    log = busy_state / "profiles" / "demo" / "logs" / "engine.log"
    for args in (
        ["--help"],
        ["parse-log", str(log)],
        ["history", "--help"],
        ["status"],
        ["--profiles-dir", str(shipped), "--profile", "demo", "--dry-run", "--explain"],
    ):
        code, err = into_a_closed_pipe(tmp_path, "--state-dir", str(state), *args)
        assert (code, err) == (CLOSED_PIPE, ""), args
    assert no_bug_report(tmp_path, state)


def test_a_start_whose_stderr_reader_left_still_finishes_and_stops_its_engine(tmp_path: Path) -> None:
    """`launch try 2>&1 | head -1`: the progress lines of every thread are dropped once the reader
    has gone (a log reader thread that died of BrokenPipeError hung the gates); the try still runs
    its gates, records them, stops the engine and ends with 141 when its report meets the pipe."""
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    port = free_port()
    write_profile(profiles, "svc", port)
    launch = f'"{LAUNCH}" --profiles-dir "{profiles}" --state-dir "{state}" try --profile svc'
    code, _ = pipeline(tmp_path, launch, stderr_too=True)
    assert code == CLOSED_PIPE
    records = [json.loads(line) for line in (state / "history.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records] == ["try"] and records[0]["passed"] is True
    assert started_from(state, port) == []
    assert no_bug_report(tmp_path, state)


def started_from(state: Path, port: int) -> list[str]:
    """Processes left of that try: the log keeper names the state dir, the engine its port."""
    left = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or ())
        if str(state) in line or f"--port {port} " in line:
            left.append(line)
    return left


def test_the_diagnostic_stream_drops_lines_after_its_reader_left() -> None:
    """The unit of the rule above, on a real pipe whose read end is closed."""
    from launcher.terminal import DiagnosticStream

    read_end, write_end = os.pipe()
    os.close(read_end)
    raw = os.fdopen(write_end, "w")
    stream = DiagnosticStream(raw)
    assert not stream.reader_gone
    assert stream.write("first line\n") == len("first line\n")
    stream.flush()
    assert stream.reader_gone
    assert stream.write("dropped\n") == len("dropped\n")
    stream.flush()
    with pytest.raises(BrokenPipeError):
        raw.close()  # what the stream kept from its caller: the unwrapped stream raises
