"""The start timeline read from real vLLM 0.26.0 logs: contiguous phases that add up to the start.

Every recorded 0.26.0 startup that reached the server is cut into phases whose seconds add up to the
log's own span (its first line to `Starting vLLM server`, `startup_seconds`) within 1 s; the figures
each phase states (weights GiB and GB/s, the compile cache, the graph count) come from its lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.logfacts import parse_file, parse_text
from launcher.logfacts.timeline import PHASES, Stamps, gb_per_s, phases

REAL = Path(__file__).parents[1] / "data" / "real-vllm-0.26"
READY_LOGS = sorted(p for p in REAL.rglob("*.log") if parse_file(str(p), events=False)[0].outcome == "ready")
ORDER = [name for _, name, _ in PHASES]


def test_the_recorded_ready_starts_are_many() -> None:
    assert len(READY_LOGS) >= 8, READY_LOGS


@pytest.mark.parametrize("log", READY_LOGS, ids=lambda p: str(p.relative_to(REAL)))
def test_phases_add_up_to_the_start(log: Path) -> None:
    facts, _ = parse_file(str(log), events=False)
    names = [p.name for p in facts.timeline]
    assert names[0] == "startup" and names[-1] == "api_server"
    assert names == sorted(names, key=ORDER.index)  # in log order, none twice
    assert facts.startup_seconds is not None
    assert round(sum(p.seconds for p in facts.timeline), 6) == round(
        facts.startup_seconds, 6
    )  # contiguous: no gap, no overlap


CORPUS = Path(__file__).parents[1] / "data" / "logs"
RELEASES: dict[str, str] = json.loads((CORPUS / "releases.json").read_text())["releases"]
READY_EXCERPTS = sorted(
    p for p in CORPUS.glob("*.log") if parse_file(str(p), events=False)[0].outcome == "ready"
)


@pytest.mark.parametrize("log", READY_EXCERPTS, ids=lambda p: p.stem)
def test_every_release_the_catalogue_knows_gets_a_timeline(log: Path) -> None:
    """0.6.4 to 0.33: a ready start's phases add up to its span; an excerpt that begins after the
    load line folds the time before into the weights."""
    facts, _ = parse_file(str(log), events=False)
    assert facts.timeline, f"{log.name} ({RELEASES[log.stem]}) started but has no timeline"
    assert facts.startup_seconds is not None
    assert sum(p.seconds for p in facts.timeline) == facts.startup_seconds
    assert facts.timeline[-1].name == "api_server"


def test_the_excerpts_span_the_releases() -> None:
    ready = {RELEASES[p.stem].split()[0] for p in READY_EXCERPTS}
    assert {"0.6.4", "0.8.5", "0.11.0", "0.26.0", "0.33.0"} <= ready, ready


def test_an_unstamped_uvicorn_line_ends_the_start_at_the_line_before() -> None:
    """≤ 0.6 announces the server only through uvicorn, whose lines carry no stamp."""
    facts, _ = parse_file(str(CORPUS / "v06_old_worker_form.log"), events=False)
    assert facts.startup_seconds == 35  # 20:25:33 banner to 20:26:08, the routes before uvicorn
    assert [p.name for p in facts.timeline] == ["startup", "weights", "kv_profiling", "graphs", "api_server"]


def test_tiny_start_phase_by_phase() -> None:
    facts, _ = parse_file(str(REAL / "tiny.log"), events=False)
    got = {p.name: p.seconds for p in facts.timeline}
    # 09:31:20 banner, :56 load, :57 loaded, 09:32:07 compiled, :08 KV, :09 graphs, :22 engine, :24 server
    assert got == {
        "startup": 36,
        "weights": 1,
        "compile": 10,
        "kv_profiling": 1,
        "graphs": 1,
        "warmup": 13,
        "api_server": 2,
    }
    detail = {p.name: p.detail for p in facts.timeline}
    assert detail["compile"]["cache"] == "miss"
    assert (
        detail["compile"]["cache_dir"] == "/root/.cache/vllm/torch_compile_cache/4860bbac39/rank_0_0/backbone"
    )
    assert detail["graphs"] == {"count": 102, "seconds": 1.0}
    assert facts.compile_cache == "miss"


def test_a_warm_compile_cache_is_a_hit() -> None:
    facts, _ = parse_file(str(REAL / "h200-2" / "promotion" / "engine.log"), events=False)
    compile_phase = next(p for p in facts.timeline if p.name == "compile")
    assert compile_phase.detail["cache"] == "hit"
    assert compile_phase.detail["seconds"] == 1.19


def test_eager_start_folds_the_missing_phases_into_the_next() -> None:
    facts, _ = parse_file(str(REAL / "eager" / "vllm.log"), events=False)
    names = [p.name for p in facts.timeline]
    assert "compile" not in names and "graphs" not in names
    assert sum(p.seconds for p in facts.timeline) == facts.startup_seconds


def test_weights_phase_states_gib_and_gb_per_s() -> None:
    text = (
        "INFO 03-01 10:00:00 [api_utils.py:325] vLLM server version 0.26.0, serving model m\n"
        "INFO 03-01 10:00:30 [model_runner.py:284] Loading model from scratch...\n"
        "INFO 03-01 10:00:33 [default_loader.py:430] Loading weights took 3.10 seconds\n"
        "INFO 03-01 10:00:34 [model_runner.py:305] Model loading took 4.69 GiB and 3.6 seconds\n"
        "INFO 03-01 10:00:40 [api_server.py:677] Starting vLLM server on http://127.0.0.1:8000\n"
        "INFO:     Application startup complete.\n"
    )
    facts, _ = parse_text(text)
    weights = next(p for p in facts.timeline if p.name == "weights")
    assert weights.seconds == 4
    assert weights.detail == {"gib": 4.69, "load_seconds": 3.1, "gb_per_s": gb_per_s(4.69, 3.1)}
    assert gb_per_s(4.69, 3.1) == 1.62
    assert [p.name for p in facts.timeline] == ["startup", "weights", "api_server"]


def test_no_timeline_before_the_server_started() -> None:
    stamps = Stamps()
    stamps.mark("first", "03-01 10:00:00")
    stamps.mark("loading", "03-01 10:00:30")
    assert phases(stamps, {}) == []
    assert gb_per_s(0.0, 1.0) is None and gb_per_s(1.0, None) is None


def test_a_start_over_new_year_keeps_its_phases() -> None:
    stamps = Stamps()
    for milestone, ts in (
        ("first", "12-31 23:59:50"),
        ("loading", "01-01 00:00:05"),
        ("serving", "01-01 00:00:09"),
    ):
        stamps.mark(milestone, ts)
    assert [(p.name, p.seconds) for p in phases(stamps, {})] == [("startup", 15), ("api_server", 4)]
