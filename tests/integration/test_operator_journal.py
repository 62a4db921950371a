"""What an operator under systemd sees: the launcher writes plain `event key=value` text to the
journal (its stderr, named by JOURNAL_STREAM), with why it reloads (the request id) and why it
stops (the signal); `launch set --apply` shows the reload's progress live, as `launch try` does,
and says how long the engine was down."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from tests.launcher_run import LAUNCH, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration


def test_set_apply_shows_live_progress_and_the_journal_gets_text(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start(journal=True)
    launcher.wait_phase("serving")
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "set", "svc", "max_num_seqs=2", "--tag", "seqs", "--apply"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    verdict_at = out.index("reloaded: the launcher serves the profile as it is now")
    live = [line.split("] ", 1)[1] for line in out[:verdict_at] if line.startswith("  [")]
    # vLLM's startup steps and each gate, as they came, before the verdict
    for step in (
        "loading weights",
        "KV cache sized",
        "gate 2/4 graph_capture: pass",
        "gate 4/4 tool_call: pass",
    ):
        assert any(step in line for line in live), (step, live)
    requested = next(line for line in live if "reload requested" in line)
    request_id = re.search(r"requests=([0-9a-f]{32})", requested)
    assert request_id is not None, requested
    down = re.search(r"the engine was down (\d+\.\d) s", done.stdout)
    assert down is not None and float(down.group(1)) > 0, done.stdout

    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    journal = launcher.output().splitlines()
    assert journal and all(re.match(r"<[0-7]>[a-z_]+\.[a-z_]+( |$)", line) for line in journal), journal[:5]
    assert not any("timestamp" in line or line[3:].startswith("{") for line in journal)
    assert '<6>launcher.reload msg="reload requested" phase=serving' in "\n".join(journal)
    assert any(
        line.startswith("<6>launcher.reload ") and f"requests={request_id.group(1)}" in line
        for line in journal
    )
    stop = '<6>launcher.stop msg="SIGTERM received: stopping"'
    assert any(line.startswith(stop) and "signal=SIGTERM" in line for line in journal)
    assert any(line.startswith("<6>launcher.downtime ") for line in journal)
