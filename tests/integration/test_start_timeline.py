"""Every start records where its seconds went: `launch try` prints the timeline and keeps it in the
history; `launch history --starts` puts the last starts of a profile side by side."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from launcher.logfacts.timeline import PHASES
from tests.launcher_run import LAUNCH, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration


def test_a_try_records_its_timeline_and_history_compares_the_starts(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    state = tmp_path / "state"
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state)]
    outputs = []
    for extra in (["--json"], []):
        tried = subprocess.run(
            [*argv, "try", "--profile", "svc", *extra], capture_output=True, text=True, timeout=120
        )
        assert tried.returncode == 0, tried.stdout + tried.stderr
        outputs.append(tried.stdout)
    first = json.loads(outputs[0])  # --json: one object on stdout, nothing else
    assert "\nstart timeline\n" in tried.stdout
    records = [json.loads(line) for line in (state / "history.jsonl").read_text().splitlines()]
    timelines = [r["timeline"] for r in records if r["event"] == "try"]
    assert len(timelines) == 2
    # the JSON holds the record the tables are drawn from: the timeline and the gates as kept
    tries = [r for r in records if r["event"] == "try"]
    assert first["timeline"] == timelines[0] and first["gates"] == tries[0]["gates"]
    names = [p["name"] for p in timelines[-1]["phases"]]
    known = [name for _, name, _ in PHASES]
    assert names[0] == "startup" and names[-2] == "api_server" and names[-1] == "outside_log"
    assert set(names[:-1]) <= set(known)
    assert sum(p["seconds"] for p in timelines[-1]["phases"]) == pytest.approx(timelines[-1]["total_seconds"])

    side = subprocess.run(
        [*argv, "history", "--profile", "svc", "--starts", "--last", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert side.returncode == 0, side.stderr
    head, *rows = side.stdout.splitlines()
    assert len(head.split()) == 3  # phase, then the two starts
    assert [row.split()[0] for row in rows[: len(names)]] == names
    as_json = subprocess.run(
        [*argv, "history", "--profile", "svc", "--starts", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = json.loads(as_json.stdout)
    assert [s["timeline"] for s in out["starts"]] == timelines and len(out["changes"]) == 1


def test_starts_need_a_profile(tmp_path: Path) -> None:
    refused = subprocess.run(
        [str(LAUNCH), "--state-dir", str(tmp_path / "state"), "history", "--starts"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--profile NAME" in refused.stderr and "Traceback" not in refused.stderr


def test_a_served_start_says_where_its_seconds_went_in_the_journal(launcher_factory: LauncherFactory) -> None:
    """`launch --profile`: the promoted start's timeline is one line of its output, as recorded."""
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    launcher.wait_phase("serving")
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    gated = next(r for r in launcher.history() if r["event"] == "gates")
    line = next(line for line in launcher.output().splitlines() if "start timeline: " in line)
    shown = line.split("start timeline: ", 1)[1]
    for phase in gated["timeline"]["phases"]:
        assert f"{phase['name']} {phase['seconds']:.0f} s" in shown
    assert f"total {gated['timeline']['total_seconds']:.0f} s" in shown
