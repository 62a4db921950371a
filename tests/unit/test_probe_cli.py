"""`launch probe` at the command line: bad input exits 2 touching nothing; --dry-run shows the plan
(this test process stands in for a live launcher); --recover without a journal has nothing to do."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from launcher.profile.diff import Change
from launcher.profile.plan import build_plan
from launcher.supervisor.history import utc_now
from tests.conftest import tree_snapshot

PROFILE = """\
[engine]
model = "/models/fable-9b"
served_model_name = "fable-9b"
[args]
max_num_seqs = 8
gpu_memory_utilization = 0.90
[env]
VLLM_SM70_QWEN_GDN_FULL_FORWARD = "1"
"""


def probe(profiles: Path, state: Path, *args: str) -> Result:
    return CliRunner().invoke(
        launch, ["--profiles-dir", str(profiles), "--state-dir", str(state), "probe", *args]
    )


@pytest.fixture
def box(tmp_path: Path) -> tuple[Path, Path]:
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    (profiles / "prod.toml").write_text(PROFILE)
    return profiles, state


def serve_as_this_process(state: Path, fingerprint: str) -> None:
    """launcher.json naming a live pid (ours) and a status.json serving `fingerprint`."""
    folder = state / "profiles" / "prod"
    folder.mkdir(parents=True)
    (folder / "launcher.json").write_text(json.dumps({"pid": os.getpid(), "started_at": utc_now()}))
    status = {"phase": "serving", "serving_fingerprint": fingerprint, "launcher_pid": os.getpid()}
    (folder / "status.json").write_text(json.dumps(status))
    records = [("2026-08-06T10:00:00.000000Z", "start"), ("2026-08-06T10:04:00.000000Z", "promoted")]
    (state / "history.jsonl").write_text(
        "".join(json.dumps({"ts": ts, "event": e, "profile": "prod"}) + "\n" for ts, e in records)
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--arm", "a:max_num_seqs=16"], "needs --profile NAME"),
        (["--profile", "prod"], "give at least one --arm"),
        (["--profile", "prod", "--arm", "a:max_num_seq=16"], "arm 'a' (max_num_seq=16) does not render"),
        (["--profile", "prod", "--arm", "a:max_num_seqs=8"], "starts exactly what production starts"),
        (
            ["--profile", "prod", "--arm", "a:max_num_seqs=16", "--bench", "huge"],
            "--bench 'huge' is not a preset",
        ),
        (["--profile", "nope", "--arm", "a:max_num_seqs=16"], "no profile 'nope'"),
    ],
)
def test_bad_input_exits_2_and_touches_nothing(box: tuple[Path, Path], args: list[str], says: str) -> None:
    profiles, state = box
    before = tree_snapshot(profiles)
    result = probe(profiles, state, *args, "--out", str(state.parent / "out"))
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert tree_snapshot(profiles) == before and not state.exists() and not (state.parent / "out").exists()


def test_dry_run_shows_arms_diffs_and_downtime_and_touches_nothing(box: tuple[Path, Path]) -> None:
    profiles, state = box
    serve_as_this_process(state, build_plan(profiles, "prod").fingerprint())
    before = tree_snapshot(state)
    result = probe(profiles, state, "--profile", "prod", "--arm", "util030:gpu_memory_utilization=0.30",
                   "--arm", "gdn0:env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0", "--dry-run",
                   "--out", str(state.parent / "out"))  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"launcher pid {os.getpid()} (started by hand, detached), phase serving" in out
    assert "1  util030  gpu_memory_utilization=0.30" in out and "+ --gpu-memory-utilization 0.3" in out
    assert "- env VLLM_SM70_QWEN_GDN_FULL_FORWARD 1\n       + env VLLM_SM70_QWEN_GDN_FULL_FORWARD 0" in out
    assert "expected downtime: 3 starts × 240 s" in out and "about 12.0 min" in out
    assert tree_snapshot(state) == before and not (state.parent / "out").exists()


def test_dry_run_json_holds_what_the_text_shows_and_touches_nothing(box: tuple[Path, Path]) -> None:
    """Was: `--dry-run --json` printed the text (issue 44 point 4): now one JSON object, the same
    facts as the text, under probe.json's names."""
    profiles, state = box
    serve_as_this_process(state, build_plan(profiles, "prod").fingerprint())
    before = tree_snapshot(state)
    args = ["--profile", "prod", "--arm", "util030:gpu_memory_utilization=0.30",
            "--arm", "gdn0:env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0", "--dry-run",
            "--out", str(state.parent / "out")]  # fmt: skip
    text, as_json = probe(profiles, state, *args).output, probe(profiles, state, *args, "--json")
    assert as_json.exit_code == 0, as_json.output
    shown = json.loads(as_json.stdout)
    assert list(shown) == sorted(shown) and shown["would_refuse"] is None
    assert shown["production"]["launcher_pid"] == os.getpid() and shown["production"]["phase"] == "serving"
    assert "env" not in shown["production"]  # as in probe.json: the launcher's environment stays out
    assert [(a["index"], a["name"], a["started"]) for a in shown["arms"]] == [
        (0, "prod", False),
        (1, "util030", True),
        (2, "gdn0", True),
    ]
    production, *changed = shown["arms"]
    assert f"0  prod  production prod@{production['fingerprint']}: measured as it serves" in text
    for arm in changed:
        assert f"{arm['index']}  {arm['name']}  {' '.join(arm['keys'])}  (prod@{arm['fingerprint']})" in text
        shown_lines = [line for change in arm["changes"] for line in Change(**change).lines()]
        assert shown_lines and all(f"       {line}\n" in text for line in shown_lines)
    assert shown["downtime"] == {
        "expected": True,
        "starts": 3,
        "typical_start_s": 240.0,
        "recent_starts_s": [240.0],
        "estimate_s": 720.0,
    }
    assert "expected downtime: 3 starts × 240 s" in text and "about 12.0 min" in text
    bench = shown["settings"]["bench"]
    assert f"then {shown['settings']['runs']} bench run(s) ({bench})" in text
    assert shown["out_dir"] == str(state.parent / "out") and f"results: {shown['out_dir']}/report.md" in text
    assert tree_snapshot(state) == before and not (state.parent / "out").exists()


def test_dry_run_json_that_would_be_refused_exits_2_with_the_reason_in_it(box: tuple[Path, Path]) -> None:
    profiles, state = box
    serve_as_this_process(state, "0000aaaa0000aaaa")
    result = probe(
        profiles, state, "--profile", "prod", "--arm", "seqs16:max_num_seqs=16", "--dry-run", "--json"
    )
    assert result.exit_code == 2
    assert "serves prod@0000aaaa0000aaaa" in json.loads(result.stdout)["would_refuse"]
    assert result.stderr.startswith("error: the real run would refuse: ")


def test_recover_json_is_refused_touching_nothing(box: tuple[Path, Path]) -> None:
    """--recover prints its verdict, no table: --json is refused, not silently ignored."""
    profiles, state = box
    result = probe(profiles, state, "--recover", "--json")
    assert result.exit_code == 2 and "--json goes with a probe or its --dry-run" in result.stderr
    assert result.stdout == "" and not state.exists()


def test_dry_run_says_when_the_real_run_would_refuse(box: tuple[Path, Path]) -> None:
    profiles, state = box
    serve_as_this_process(state, "0000aaaa0000aaaa")  # edited since: what serves is not the profile
    result = probe(profiles, state, "--profile", "prod", "--arm", "seqs16:max_num_seqs=16", "--dry-run")
    assert result.exit_code == 2
    assert "the real run would refuse" in result.output and "serves prod@0000aaaa0000aaaa" in result.output


def test_recover_without_a_journal_has_nothing_to_do(box: tuple[Path, Path]) -> None:
    profiles, state = box
    result = probe(profiles, state, "--recover")
    assert result.exit_code == 0 and "nothing to recover" in result.output
