"""GuideLLM beside `launch bench` (issue 22, check-i22.sh step 6): the table and the workload read
the reports as the tools write them, hostile input is refused cleanly, and the wheels that travel to
the GPU machine are pinned and hashed.

Fixtures: `launch bench`'s summary.json of the H200 run (tests/data/real-vllm-0.26/h200-2/bench/),
and GuideLLM 0.8.1's JSON reports from the rehearsal of step 6 against vllm-sim
(tests/data/guidellm/, trimmed by `trim_report` below to what the table reads).
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO

SCRIPTS = REPO / "scripts" / "real-vllm"
BENCH = REPO / "tests" / "data" / "real-vllm-0.26" / "h200-2" / "bench" / "summary.json"
GUIDE = REPO / "tests" / "data" / "guidellm"


def _script(name: str) -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))


@pytest.fixture(scope="module")
def sbs() -> ModuleType:
    return _script("side_by_side")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "side_by_side.py"), *args], capture_output=True, text=True, timeout=60
    )


def _rows(text: str) -> dict[tuple[str, str, str], list[str]]:
    rows = {}
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[(cells[0], cells[1], cells[2])] = cells
    return rows


def test_table_puts_both_tools_side_by_side_per_context_and_concurrency() -> None:
    done = _run("table", str(BENCH), f"short={GUIDE / 'short.json'}", f"1k={GUIDE / '1k.json'}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| context | c | tool | requests | in tok | out tok | TTFT ms median / p99 |")
    rows = _rows(done.stdout)
    # 2 contexts x 7 levels x 2 tools, the bench's context order (short before 1k), c ascending.
    assert len(rows) == 28
    assert [k for k in rows if k[2] == "launch bench"][:2] == [
        ("short", "1", "launch bench"),
        ("short", "2", "launch bench"),
    ]
    # launch bench's own figures, unconverted (the H200 run's c1 short cell).
    assert rows[("short", "1", "launch bench")][3:7] == ["16", "64.2", "39.8", "10.41 / 16.99"]
    assert rows[("short", "1", "launch bench")][-1] == "467"


def test_guidellm_figures_are_its_own_with_request_latency_in_ms(sbs: ModuleType) -> None:
    report = json.loads((GUIDE / "short.json").read_text(encoding="utf-8"))
    rows = sbs.guidellm_rows(report, "short", GUIDE / "short.json")
    first = report["benchmarks"][0]["metrics"]
    c = report["benchmarks"][0]["config"]["strategy"]["streams"]
    row = rows[("short", c)]
    assert row["TTFT"][0] == pytest.approx(first["time_to_first_token_ms"]["successful"]["median"])
    assert row["ITL"][1] == pytest.approx(first["inter_token_latency_ms"]["successful"]["percentiles"]["p99"])
    assert row["E2EL"][0] == pytest.approx(1000 * first["request_latency"]["successful"]["median"])
    assert row["tok_s"] == pytest.approx(first["output_tokens_per_second"]["total"]["mean"])
    assert row["requests"] == first["request_totals"]["successful"]
    assert sorted(c for _, c in rows) == [1, 2, 4, 8, 16, 32, 64]


def test_a_level_one_tool_did_not_run_says_so(sbs: ModuleType) -> None:
    bench = sbs.bench_rows(json.loads(BENCH.read_text(encoding="utf-8")), BENCH)
    report = json.loads((GUIDE / "short.json").read_text(encoding="utf-8"))
    report["benchmarks"] = report["benchmarks"][:1]
    guide = sbs.guidellm_rows(report, "short", GUIDE / "short.json")
    rows = _rows("\n".join(sbs.table(bench, guide)))
    assert rows[("short", "8", "guidellm")][3] == "not run"
    assert rows[("1k", "64", "guidellm")][3] == "not run"
    assert rows[("short", "1", "guidellm")][3] != "not run"


def test_workload_matches_the_bench_cells(sbs: ModuleType) -> None:
    summary = json.loads(BENCH.read_text(encoding="utf-8"))
    lines = list(sbs.workload(summary, BENCH, template=10))
    # Mean prompt tokens by usage (64.25 and 1010.5), less the template's; max_tokens; the cells'
    # levels and request counts (8 prompts x 2 rounds, whole copies above c8).
    assert lines == [
        "short 54 256 1,2,4,8,16,32,64 16,16,16,16,32,64,128",
        "1k 1000 256 1,2,4,8,16,32,64 16,16,16,16,32,64,128",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read it as JSON"),
        ('{"benchmarks": []}', "no 'benchmarks' list"),
        ('{"benchmarks": [{"config": {"strategy": {"type_": "synchronous"}}}]}', "'synchronous' benchmark"),
        ('{"benchmarks": [{"config": {"strategy": {"type_": "concurrent"}}}]}', "lacks what it should have"),
    ],
)
def test_a_bad_guidellm_report_is_refused_with_exit_2(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "report.json"
    bad.write_text(content, encoding="utf-8")
    done = _run("table", str(BENCH), f"short={bad}")
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_bad_bench_summary_and_bad_usage_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "summary.json"
    other.write_text('{"cells": "none"}', encoding="utf-8")
    done = _run("table", str(other), f"short={GUIDE / 'short.json'}")
    assert (done.returncode, "no 'cells' list" in done.stderr) == (2, True)
    done = _run("workload", str(other))
    assert (done.returncode, "no options.max_tokens" in done.stderr) == (2, True)
    done = _run("table", str(BENCH), "short")
    assert (done.returncode, "side_by_side.py table BENCH_SUMMARY" in done.stderr) == (2, True)
    assert "Traceback" not in done.stderr


def test_the_wheels_that_travel_are_pinned_and_hashed() -> None:
    lines = [
        line
        for line in (SCRIPTS / "guidellm-wheels.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    pin = re.compile(r"^[a-z0-9-]+==[0-9][0-9a-z.]* --hash=sha256:[0-9a-f]{64}  # [0-9,]+ B$")
    assert [line for line in lines if not pin.match(line)] == []
    assert lines[0].startswith("guidellm==0.8.1 ")
    names = [line.split("==")[0] for line in lines]
    assert len(names) == len(set(names))
    # What GuideLLM pins against the image lands in its own site; torch and numpy never travel.
    assert {"click", "multidict", "fsspec", "pyarrow", "pandas", "datasets"} <= set(names)
    assert not {"torch", "numpy", "transformers", "vllm"} & set(names)


def test_fetch_refuses_a_part_size_the_device_cannot_carry(tmp_path: Path) -> None:
    for size in ("61", "44", "x"):
        done = subprocess.run(
            ["bash", str(SCRIPTS / "fetch-guidellm.sh"), str(tmp_path / "g"), size],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2
        assert "PART_MIB must be 45-60" in done.stderr
    assert not (tmp_path / "g").exists()


def test_fetch_never_replaces_a_folder_it_did_not_make(tmp_path: Path) -> None:
    keep = tmp_path / "keep.txt"
    keep.write_text("mine", encoding="utf-8")
    done = subprocess.run(
        ["bash", str(SCRIPTS / "fetch-guidellm.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "holds other files than an earlier fetch-guidellm.sh" in done.stderr
    assert keep.read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.parent.iterdir() if p.name.startswith(tmp_path.name)) == [
        tmp_path.name
    ]


def _fake_dist(root: Path, name: str, requires: list[str]) -> None:
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0"] + [
        f"Requires-Dist: {r}" for r in requires
    ]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_dependency_walk_names_what_is_missing_and_what_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = _script("guidellm_deps")
    _fake_dist(
        tmp_path,
        "tool_under_test",
        [
            "pytest",
            "pytest<1",
            "no-such-distribution-anywhere>=1",
            'never-on-this-platform; sys_platform == "win32-never"',
            'only-with-an-extra; extra == "gui"',
        ],
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    lines, problems = deps.walk("tool_under_test")
    assert problems == 2
    assert any(line.startswith("MISSING no-such-distribution-anywhere>=1") for line in lines)
    assert any(line.startswith("CONFLICT pytest ") and "needs pytest<1" in line for line in lines)
    assert any(line.startswith("ok tool-under-test 1.0 from " + str(tmp_path)) for line in lines)
    assert not any("never-on-this-platform" in line or "only-with-an-extra" in line for line in lines)


def trim_report(report: dict[str, Any]) -> dict[str, Any]:
    """What the fixtures keep of a GuideLLM report: its metadata, each benchmark's strategy, and
    the distributions the table reads (mean, median, p99 of the successful requests; the rate's
    `total`). Kept here so that a new rehearsal's report can be trimmed the same way."""
    keep = ("mean", "median", "count")
    names = (
        "time_to_first_token_ms",
        "inter_token_latency_ms",
        "time_per_output_token_ms",
        "request_latency",
        "prompt_token_count",
        "output_token_count",
    )
    benchmarks = []
    for bench in report["benchmarks"]:
        metrics = bench["metrics"]
        kept: dict[str, Any] = {"request_totals": metrics["request_totals"]}
        for name in names:
            dist = metrics[name]["successful"]
            kept[name] = {
                "successful": {
                    **{k: dist[k] for k in keep},
                    "percentiles": {"p99": dist["percentiles"]["p99"]},
                }
            }
        kept["output_tokens_per_second"] = {
            "total": {"mean": metrics["output_tokens_per_second"]["total"]["mean"]}
        }
        benchmarks.append({"config": {"strategy": bench["config"]["strategy"]}, "metrics": kept})
    return {"metadata": report["metadata"], "benchmarks": benchmarks}


def test_device_phases_refuse_a_part_not_carried_and_an_install_without_parts(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "REAL_VLLM_HOME": str(tmp_path / "home")}
    device = str(SCRIPTS / "device.sh")
    stash = subprocess.run(
        ["bash", device, "guidellm-stash", "g9"], capture_output=True, text=True, timeout=60, env=env
    )
    assert stash.returncode == 3
    assert ".vllm-wheels/guidellm/g9 was not carried" in stash.stdout
    install = subprocess.run(
        ["bash", device, "guidellm-install"], capture_output=True, text=True, timeout=60, env=env
    )
    assert install.returncode == 3
    assert "no GuideLLM part stashed" in install.stdout
    assert not (tmp_path / "home" / "guidellm-parts").exists() or not any(
        (tmp_path / "home" / "guidellm-parts").iterdir()
    )


def test_check_i22_knows_step_6_and_no_step_after_it() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPTS / "check-i22.sh"), "6", "7"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr.strip()) == (2, "unknown step 7 (0-6)")
