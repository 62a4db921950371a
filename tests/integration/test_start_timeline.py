"""Every start records where its seconds went: `launch try` prints the timeline and keeps it in the
history; `launch history --starts` puts the last starts of a profile side by side, and `launch bench
--profile` charts them beside its measurement."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from launcher.logfacts.timeline import PHASES
from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, free_port, write_profile

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
    # the launcher's own clock frames vLLM's lines: its imports before them, the gates after ready
    assert names[:2] == ["imports", "startup"] and names[-2:] == ["api_server", "gates"]
    assert set(names[1:-1]) <= set(known)
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


TINY_BENCH = ["--contexts", "short", "--concurrency", "1", "--rounds", "1", "--prompts", "1",
              "--max-tokens", "8"]  # fmt: skip


def test_bench_of_a_profile_charts_its_starts_and_bench_of_a_url_does_not(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    launcher = Launcher(tmp_path / "profiles", tmp_path / "state", "svc")
    port = free_port()
    write_profile(launcher.profiles, "svc", port)
    state = ["--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state)]

    def bench(*server: str, out: Path) -> subprocess.CompletedProcess[str]:
        argv = [str(LAUNCH), *state, "bench", *server, *TINY_BENCH, "--json", "--out", str(out)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    try:
        launcher.start().wait_phase("serving")
        by_profile = bench("--profile", "svc", out=tmp_path / "p")
        by_url = bench("--url", f"http://127.0.0.1:{port}", out=tmp_path / "u")
    finally:
        if launcher.proc is not None and launcher.proc.poll() is None:
            launcher.signal(signal.SIGTERM)  # our own launcher, by pid: it stops its engine's group
            launcher.wait_exit()
        assert launcher.cleanup() == [], "processes were left behind"
    assert by_profile.returncode == 0, by_profile.stderr[-3000:]
    summary = json.loads((tmp_path / "p" / "summary.json").read_text(encoding="utf-8"))
    [gated] = [r for r in launcher.history() if r["event"] == "gates"]  # the start this test made
    assert gated["passed"] is True and gated["timeline"]["phases"][-1]["name"] == "gates"
    assert summary["starts"] == [{k: gated[k] for k in ("ts", "event", "label", "passed", "timeline")}]
    assert str(tmp_path / "p" / "start_time.png") in summary["files"]["plots"]
    assert (tmp_path / "p" / "start_time.png").read_bytes().startswith(b"\x89PNG")
    assert by_url.returncode == 0, by_url.stderr[-3000:]
    plain = json.loads(by_url.stdout)
    assert "starts" not in plain and not (tmp_path / "u" / "start_time.png").exists()
    assert [Path(p).name for p in plain["files"]["plots"]] == [
        "throughput_vs_concurrency.png",
        "ttft_vs_context.png",
    ]
