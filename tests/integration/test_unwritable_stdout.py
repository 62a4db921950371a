"""A stdout that cannot be written (a full disk, `>&-`, a closed descriptor at start) ends the command
with exit 74 (EX_IOERR) and one line on stderr that says so: the answer is lost, which is not a bug in
the launcher (no exit 70, no bug report) and not the reader's choice (a closed pipe stays 141).

Each case is the real `launch` in a real shell, its descriptors redirected as an operator would.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH

OUTPUT_LOST = 74
LOST = "error: launch could not write its output to stdout"
SHIPPED = Path(__file__).resolve().parents[2] / "profiles"


def shell(tmp_path: Path, words: str, redirects: str) -> tuple[int, str]:
    """Run `launch WORDS REDIRECTS` in bash; return its exit code and what reached stderr (a file)."""
    err = tmp_path / "launch.err"
    err.write_text("")
    script = f'exec 9>"{err}"; "{LAUNCH}" --state-dir "{tmp_path / "state"}" {words} 2>&9 {redirects}'
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    done = subprocess.run(["bash", "-c", script], env=env, timeout=120, check=False)
    return done.returncode, err.read_text(encoding="utf-8", errors="replace")


def said_once(err: str, cause: str) -> bool:
    """One line says the output was lost, and why; nothing else is an error (`logs` names its file)."""
    lines = err.splitlines()
    errors = [line for line in lines if "error" in line.lower() or "Traceback" in line]
    return errors == lines[-1:] and lines[-1].startswith(LOST) and cause in lines[-1]


def no_bug_report(tmp_path: Path) -> bool:
    return not (tmp_path / "state" / "bug-reports").exists() and not list(
        (tmp_path / "tmp").glob("vllm-gate-bug-reports/*")
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A state dir with a history and an engine log, so that every command below has an answer."""
    root = tmp_path / "state"
    log = root / "profiles" / "demo" / "logs" / "engine.log"
    log.parent.mkdir(parents=True)
    log.write_text("(APIServer pid=7) INFO 12-03 11:29:01 [api.py:1] hello\n")
    (root / "history.jsonl").write_text(
        '{"ts": "2026-12-03T11:29:00Z", "event": "try", "profile": "demo", "passed": true}\n'
    )
    return root


@pytest.mark.parametrize(
    "words",
    [
        "status",
        "history",
        "logs demo",
        f'--profiles-dir "{SHIPPED}" --profile demo --dry-run',
        f'--profiles-dir "{SHIPPED}" rollback --list --profile demo',
    ],
    ids=["status", "history", "logs", "dry-run", "rollback-list"],
)
def test_a_full_stdout_ends_the_command_with_74_and_one_line(tmp_path: Path, state: Path, words: str) -> None:
    code, err = shell(tmp_path, words, ">/dev/full")
    assert code == OUTPUT_LOST, err
    assert said_once(err, "No space left on device"), err
    assert no_bug_report(tmp_path)


@pytest.mark.parametrize("redirects", [">&-", "<&- >&-"], ids=["stdout", "stdin-and-stdout"])
def test_a_stdout_closed_at_start_ends_the_command_with_74_and_one_line(
    tmp_path: Path, state: Path, redirects: str
) -> None:
    code, err = shell(tmp_path, "status", redirects)
    assert code == OUTPUT_LOST, err
    assert said_once(err, "Bad file descriptor") and err.count("\n") == 1, err
    assert no_bug_report(tmp_path)


def test_with_stdout_and_stderr_closed_the_code_alone_says_it(tmp_path: Path, state: Path) -> None:
    code, err = shell(tmp_path, "status", ">&- 2>&-")
    assert (code, err) == (OUTPUT_LOST, "")
    assert no_bug_report(tmp_path)


@pytest.mark.parametrize("redirects", ["2>&-", "2>/dev/full"], ids=["closed", "full"])
def test_a_stderr_that_cannot_be_written_changes_nothing_of_the_answer(
    tmp_path: Path, state: Path, redirects: str
) -> None:
    """stderr carries diagnostics only: the answer still comes, with status's own code (3: nothing
    serves in this state dir)."""
    out = tmp_path / "status.out"
    code, _ = shell(tmp_path, "status", f'>"{out}" {redirects}')
    assert code == 3
    assert out.read_text().startswith("nothing has run yet"), out.read_text()
    assert no_bug_report(tmp_path)


def test_a_closed_stdin_alone_changes_nothing(tmp_path: Path, state: Path) -> None:
    out = tmp_path / "history.out"
    code, err = shell(tmp_path, "history", f'<&- >"{out}"')
    assert (code, err) == (0, "")
    assert "try" in out.read_text()
