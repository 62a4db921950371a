"""A launcher bug exits 70 and leaves a bug report without secrets; operator errors keep their codes.

The bug is made in a real `launch` process: a driver (`python -c`) replaces one function that
`launch history` calls with one that raises, then runs the real CLI entry point. Nothing in the
product knows about the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from launcher.bugreport import render_report
from launcher.redact import MASK

SECRET = "sk-test-bug-report-9f3a"
DRIVER = """
import os, sys
import launcher.commands.status_cmd as status_cmd
def broken_read(self, **kwargs):
    raise RuntimeError("reader broke while holding " + os.environ["VLLM_API_KEY"])
status_cmd.History.read = broken_read
from launcher.cli import main
sys.argv = ["launch", *sys.argv[1:]]
main()
"""


def run_launch(tmp_path: Path, *args: str, driver: str = DRIVER) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VLLM_API_KEY": SECRET, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", driver, *args], env=env, capture_output=True, text=True, timeout=60
    )


def only_report(directory: Path) -> Path:
    reports = sorted(directory.glob("bug-*.txt"))
    assert len(reports) == 1, reports
    return reports[0]


def test_a_bug_exits_70_and_writes_a_report_without_the_secret(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = run_launch(tmp_path, "--state-dir", str(state), "history")
    assert done.returncode == 70, done.stderr
    report = only_report(state / "bug-reports")
    assert str(report) in done.stderr and "Traceback" not in done.stderr
    text = report.read_text(encoding="utf-8")
    assert "RuntimeError: reader broke while holding " + MASK in text
    assert "in broken_read" in text  # the traceback, down to the frame that raised
    for name in ("vllm-gate", "click", "structlog", "psutil", "vllm"):
        assert f"\n{name}: " in text
    assert "command: launch --state-dir" in text and " history" in text
    assert SECRET not in text and SECRET not in done.stderr
    assert report.stat().st_mode & 0o077 == 0


def test_an_unwritable_state_dir_puts_the_report_in_the_temp_dir(tmp_path: Path) -> None:
    state = tmp_path / "state-is-a-file"
    state.write_text("not a directory")
    done = run_launch(tmp_path, "--state-dir", str(state), "history")
    assert done.returncode == 70, done.stderr
    report = only_report(tmp_path / "tmp" / "vllm-gate-bug-reports")
    assert str(report) in done.stderr and SECRET not in report.read_text(encoding="utf-8")
    assert state.read_text() == "not a directory"


def test_operator_errors_keep_their_codes_and_write_no_report(tmp_path: Path) -> None:
    state = tmp_path / "state"
    plain = "from launcher.cli import main\nimport sys\nsys.argv[0] = 'launch'\nmain()\n"
    assert run_launch(tmp_path, "--state-dir", str(state), "--json", driver=plain).returncode == 2
    assert (
        run_launch(tmp_path, "--state-dir", str(state), "history", "--no-such", driver=plain).returncode == 2
    )
    assert not (state / "bug-reports").exists()
    assert not list((tmp_path / "tmp").glob("vllm-gate-bug-reports/*"))


def test_the_report_masks_secret_flags_of_the_command_line() -> None:
    try:
        raise ValueError("x")
    except ValueError as err:
        text = render_report(err, ["launch", "--api-key", "abcd1234", "--hf-token=hf_zzzz"], now=0.0)
    assert "abcd1234" not in text and "hf_zzzz" not in text
    assert f"--api-key {MASK}" in text and f"--hf-token={MASK}" in text
