"""What the operator reads: the dry-run preview (downtime from the history), report.md, probe.json
and the optional PNG — built from recorded numbers, no server needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.probe.arms import build_arms, parse_arm_specs
from launcher.probe.compare import compare
from launcher.probe.handover import Serving
from launcher.probe.measure import Measurement
from launcher.probe.plot import plot
from launcher.probe.presets import bench_options
from launcher.probe.preview import StartTimes, expected_downtime, render_preview, start_times
from launcher.probe.production import Mode, Production
from launcher.probe.recovery import Restored
from launcher.probe.report import markdown, to_json
from launcher.probe.results import ArmOutcome, ArmRun, ProbeResult, Settings
from launcher.supervisor.history import History
from tests.unit.test_probe_compare import GDN_OFF, PRODUCTION, run

PROFILE = '[engine]\nmodel = "/models/fable-9b"\n[args]\ngpu_memory_utilization = 0.9\n[env]\nGDN = "1"\n'
RUNNING = Production("prod", Mode.SYSTEMD, launcher_pid=77, unit="vllm-gate@prod.service", phase="serving",
                     fingerprint="f00d", uptime_s=7200.0)  # fmt: skip


def history(path: Path, *events: tuple[str, str]) -> History:
    with path.open("w") as out:
        for ts, event in events:
            out.write(json.dumps({"ts": ts, "event": event, "profile": "prod"}) + "\n")
    return History(path)


def test_expected_downtime_comes_from_start_to_promoted_in_the_history(tmp_path: Path) -> None:
    times = start_times(history(
        tmp_path / "h.jsonl",
        ("2026-08-06T10:00:00.000000Z", "start"), ("2026-08-06T10:04:10.000000Z", "promoted"),
        ("2026-08-06T11:00:00.000000Z", "start"), ("2026-08-06T11:00:30.000000Z", "rejected"),
        ("2026-08-06T12:00:00.000000Z", "start"), ("2026-08-06T12:03:50.000000Z", "promoted"),
    ), "prod")  # fmt: skip
    assert times.seconds == (250.0, 230.0) and times.typical_s == 240.0
    text = expected_downtime(2, RUNNING, times)
    assert "3 starts × 240 s" in text and "about 12.0 min" in text and "last 2 starts" in text
    assert "no start → promoted" in expected_downtime(
        2, RUNNING, start_times(History(tmp_path / "none"), "prod")
    )
    assert "none expected" in expected_downtime(2, Production("prod", Mode.NONE), times)


def test_the_preview_shows_each_arms_argv_change(profiles_dir: Path, tmp_path: Path) -> None:
    (profiles_dir / "prod.toml").write_text(PROFILE)
    arms = build_arms(profiles_dir, "prod", parse_arm_specs(["util030:gpu_memory_utilization=0.30"], "prod"))
    settings = Settings(bench_options("quick"), "quick", tmp_path / "out")
    text = render_preview(arms, RUNNING, settings, start_times(History(tmp_path / "none"), "prod"))
    assert "0  prod  production prod@" in text and "measured as it serves (not restarted)" in text
    assert "- --gpu-memory-utilization 0.9\n       + --gpu-memory-utilization 0.3" in text
    assert "4 warm-up requests, then 2 bench run(s) (quick: contexts short, concurrency 1,4" in text


def probe_result(profiles_dir: Path, tmp_path: Path) -> tuple[ProbeResult, list]:  # type: ignore[type-arg]
    (profiles_dir / "prod.toml").write_text(PROFILE)
    specs = parse_arm_specs(["gdn0:env.GDN=0", "warm:gpu_memory_utilization=0.3", "bad:env.GDN=2"], "prod")
    prod, gdn, warm, bad = build_arms(profiles_dir, "prod", specs)
    first_run_cold = [run(0.43, 150.0, 14.6, 120.0), run(0.16, 152.6, 76.5, 273.5)]
    runs = (
        ArmRun(prod, ArmOutcome.MEASURED, measurement=Measurement(tuple(PRODUCTION), 1.0, tmp_path / "p")),
        ArmRun(gdn, ArmOutcome.MEASURED, measurement=Measurement(tuple(GDN_OFF), 1.0, tmp_path / "g"),
               gates=({"name": "health", "verdict": "pass"},), seconds=300.0),
        ArmRun(warm, ArmOutcome.MEASURED, measurement=Measurement(tuple(first_run_cold), 1.0, tmp_path / "w"),
               gates=({"name": "health", "verdict": "pass"},)),
        ArmRun(bad, ArmOutcome.REJECTED, "rejected by tool_call: not valid JSON"),
    )  # fmt: skip
    restored = Restored("systemctl start vllm-gate@prod.service", Serving("serving", 88, 240.5), (), True)
    settings = Settings(bench_options("standard"), "standard", tmp_path / "out")
    result = ProbeResult("abc", "prod", RUNNING, settings, runs, restored, "t0", "t1", downtime_s=1210.0,
                         stop_how="systemctl stop vllm-gate@prod.service")  # fmt: skip
    return result, compare([(r.arm.name, r.summaries) for r in runs])


def test_the_report_labels_noise_flags_warm_up_and_recommends_nothing(
    profiles_dir: Path, tmp_path: Path
) -> None:
    result, compared = probe_result(profiles_dir, tmp_path)
    text = markdown(result, compared)
    assert (
        "serving again (systemctl start vllm-gate@prod.service, serving 240.5 s later); downtime 1210.0 s"
        in text
    )
    assert "| 3 | bad | `env.GDN=2` → `GDN=2` | rejected: rejected by tool_call: not valid JSON | - |" in text
    assert "## 8k, concurrency 8" in text
    row = next(line for line in text.splitlines() if line.startswith("| gdn0 |") and "76.8" in line)
    assert "(**+13.2%, better**)" in row and "(+0.0%, noise)" in row
    assert "- gdn0: 8k c1 decode tok/s +23.8% (better; noise band 1.0%)" in text
    assert "warm: [warm-up] run 1 8k TTFT cold 0.430 s vs 0.160 s in later runs" in text
    assert (
        "arm 0 was measured as it served (up 2.0 h); the other arms right after their start and 4 warm-up"
        in text
        and "arms without numbers: bad" in text
    )
    assert "recommend" not in text.lower() and "should" not in text.lower()
    data = to_json(result, compared)
    assert "env" not in data["production"] and data["restore"]["seconds_to_serving"] == 240.5
    gdn = data["arms"][1]
    c1 = next(m for m in gdn["metrics"] if m["metric"] == "decode_tok_s" and m["concurrency"] == 1)
    assert c1["runs"] == [152.6, 152.9] and c1["verdict"] == "better" and gdn["gates"][0]["verdict"] == "pass"
    assert data["arms"][3]["metrics"] == [] and data["arms"][3]["outcome"] == "rejected"


def test_without_matplotlib_the_png_is_skipped_with_a_note(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from pathlib import Path\nfrom launcher.probe.plot import plot\n"
        "print(plot([], Path(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "p.png")], capture_output=True, text=True
    )
    assert "pip install 'vllm-gate[plots]'" in done.stdout and not (tmp_path / "p.png").exists()


def test_with_matplotlib_the_png_is_drawn(profiles_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _, compared = probe_result(profiles_dir, tmp_path)
    assert plot(compared, tmp_path / "probe.png") is None
    assert (tmp_path / "probe.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_pngs_legend_sits_below_the_panels_and_covers_no_bar(profiles_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from launcher.probe.plot import figure

    _, compared = probe_result(profiles_dir, tmp_path)
    fig = figure(plt, [a for a in compared if a.stats])
    fig.canvas.draw()
    assert len(fig.legends) == 1 and all(axis.get_legend() is None for axis in fig.axes)
    box = fig.legends[0].get_window_extent()
    assert not any(box.overlaps(axis.get_window_extent()) for axis in fig.axes)
    assert all(axis.get_ylim()[0] == 0 for axis in fig.axes)
    plt.close(fig)


# ---- the preview's downtime estimate ------------------------------------------------------------------


def at(minute: int, second: float = 0.0) -> str:
    return f"2026-08-06T10:{minute:02d}:{second:09.6f}Z"


def test_only_the_last_five_promoted_starts_make_the_estimate(tmp_path: Path) -> None:
    events = []
    for k, took in enumerate((600, 10, 20, 30, 40, 50)):  # the oldest, 600 s, falls out
        events += [(at(k * 10), "start"), (at(k * 10 + took // 60, took % 60), "promoted")]
    times = start_times(history(tmp_path / "h.jsonl", *events), "prod")
    assert times.seconds == (10.0, 20.0, 30.0, 40.0, 50.0) and times.typical_s == 30.0


def test_a_start_that_ends_otherwise_never_pairs_with_a_later_promotion(tmp_path: Path) -> None:
    times = start_times(history(
        tmp_path / "h.jsonl",
        (at(0), "start"), (at(1), "engine_stopped"), (at(30), "promoted"),  # promoted what? not that start
        (at(31), "start"), (at(32), "rejected"), (at(40), "promoted"),
        (at(41), "start"), (at(41, 30), "promoted"), (at(50), "promoted"),  # a second promotion: no start
    ), "prod")  # fmt: skip
    assert times.seconds == (30.0,)


def test_a_restart_pairs_the_promotion_with_the_latest_start(tmp_path: Path) -> None:
    times = start_times(
        history(tmp_path / "h.jsonl", (at(0), "start"), (at(5), "start"), (at(6), "promoted")), "prod"
    )
    assert times.seconds == (60.0,)


def test_records_of_other_profiles_and_unreadable_times_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with path.open("w") as out:
        for record in (
            {"ts": at(0), "event": "start", "profile": "other"},
            {"ts": at(1), "event": "promoted", "profile": "other"},
            {"ts": "yesterday", "event": "start", "profile": "prod"},
            {"ts": at(3), "event": "promoted", "profile": "prod"},
            {"ts": at(4), "event": "start", "profile": "prod"},
            {"ts": "2026-08-06 10:05:00", "event": "promoted", "profile": "prod"},  # not our format
        ):
            out.write(json.dumps(record) + "\n")
    assert start_times(History(path), "prod").seconds == ()


def test_the_downtime_counts_one_start_per_arm_plus_the_restore_in_seconds_or_minutes() -> None:
    two_min = expected_downtime(0, RUNNING, StartTimes((119.0,)))
    assert "1 starts × 119 s" in two_min and "= about 119 s," in two_min  # production alone: its restore
    assert "= about 2.0 min," in expected_downtime(0, RUNNING, StartTimes((120.0,)))
    assert "= about 7.5 min," in expected_downtime(2, RUNNING, StartTimes((100.0, 150.0, 200.0)))
    assert "median start → promoted of the last 3 starts" in expected_downtime(
        2, RUNNING, StartTimes((1.0, 2.0, 3.0))
    )


def test_without_history_the_estimate_names_the_starts_and_what_it_lacks() -> None:
    text = expected_downtime(3, RUNNING, StartTimes(()))
    assert text.startswith("expected downtime: 4 starts (the arms, then production again)")
    assert StartTimes(()).typical_s is None


def test_a_preview_of_a_stopped_production_starts_arm_zero_like_the_others(
    profiles_dir: Path, tmp_path: Path
) -> None:
    (profiles_dir / "prod.toml").write_text(PROFILE)
    arms = build_arms(profiles_dir, "prod", parse_arm_specs(["gdn0:env.GDN=0"], "prod"))
    settings = Settings(bench_options("quick"), "quick", tmp_path / "out", runs=3)
    text = render_preview(arms, Production("prod", Mode.NONE), settings, StartTimes((240.0,)))
    assert "production now: no launcher serves it" in text and "started like the others" in text
    assert "  1  gdn0  env.GDN=0  (prod@" in text and "then 3 bench run(s)" in text
    assert text.endswith("no launcher serves this profile now, and none is started after")
    assert f"results: {tmp_path / 'out'}/report.md, probe.json, probe.png" in text
