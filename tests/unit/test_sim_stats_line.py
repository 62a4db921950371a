"""The simulator's periodic stats lines (`vllm_sim/stats_log.py`): `Engine 000: Avg prompt throughput …`
and `SpecDecoding metrics: …`, tick by tick, against the lines the real 0.26.0 runs logged and the
rules of vLLM's LoggingStatLogger and SpecDecodingLogging (v1/metrics/loggers.py, v1/spec_decode/
metrics.py). Each tick is called directly: no event loop, no sleep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.real_runs import RUNS, captured, records, sim_config, use_env
from vllm_sim.config import SimConfig
from vllm_sim.logline import LogWriter
from vllm_sim.metrics import SimMetrics
from vllm_sim.specdecode import SpecDecode
from vllm_sim.stats_log import StatsLog
from vllm_sim.versions import V026, Dialect


@dataclass
class SchedulerView:
    spec: SpecDecode | None = None


@dataclass
class StateView:
    """What StatsLog reads of the server's state, and nothing else."""

    cfg: SimConfig
    log: LogWriter
    dialect: Dialect = V026
    metrics: SimMetrics = field(default_factory=SimMetrics)
    scheduler: SchedulerView = field(default_factory=SchedulerView)


def real_lines(run_name: str, src: str) -> list[str]:
    return [r.text for r in records(RUNS[run_name].text(), "APIServer") if r.src == src]


def ticked(state: StateView, path: Path, stats: StatsLog) -> list[str]:
    """Tick once; the lines that tick logged."""
    before = len(records(path.read_text(encoding="utf-8")))
    stats.tick()
    return [r.text for r in records(path.read_text(encoding="utf-8"))[before:]]


def serve(metrics: SimMetrics, prompt: int, generated: int, queries: int = 0, hits: int = 0) -> None:
    metrics.prompt_tokens += prompt
    metrics.generation_tokens += generated
    metrics.prefix_queries += queries
    metrics.prefix_hits += hits


@pytest.fixture
def no_vllm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(monkeypatch, {})  # VLLM_LOG_STATS_INTERVAL unset: vLLM's 10 s


def test_one_intervals_counts_give_the_real_tiny_runs_line_word_for_word(
    no_vllm_env: None, tmp_path: Path
) -> None:
    with captured("APIServer", tmp_path) as (log, path):
        state = StateView(sim_config(RUNS["tiny"]), log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        state.metrics.running = 4
        serve(state.metrics, prompt=8139, generated=19975, queries=1000, hits=958)
        lines = ticked(state, path, stats)
    assert lines == [real_lines("tiny", "loggers.py:310")[0]]
    assert records(path.read_text(encoding="utf-8"))[0].src == "loggers.py:310"


def test_each_line_counts_only_its_own_interval(no_vllm_env: None, tmp_path: Path) -> None:
    with captured("APIServer", tmp_path) as (log, path):
        state = StateView(sim_config(RUNS["tiny"]), log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        serve(state.metrics, prompt=1000, generated=2000, queries=100, hits=100)
        ticked(state, path, stats)
        serve(state.metrics, prompt=50, generated=300, queries=100, hits=25)
        state.metrics.waiting, state.metrics.kv_usage = 2, 0.125
        (line,) = ticked(state, path, stats)
    assert line == (
        "Engine 000: Avg prompt throughput: 5.0 tokens/s, Avg generation throughput: 30.0 tokens/s, "
        "Running: 0 reqs, Waiting: 2 reqs, GPU KV cache usage: 12.5%, Prefix cache hit rate: 25.0%"
    )


def test_the_line_goes_quiet_after_two_idle_intervals_and_returns_with_work(
    no_vllm_env: None, tmp_path: Path
) -> None:
    """vLLM logs at DEBUG once this interval and the one before had no tokens (loggers.py:240-258)."""
    with captured("APIServer", tmp_path) as (log, path):
        state = StateView(sim_config(RUNS["tiny"]), log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        serve(state.metrics, prompt=10, generated=10)
        counts = [len(ticked(state, path, stats))]
        counts += [len(ticked(state, path, stats)) for _ in range(3)]
        serve(state.metrics, prompt=0, generated=5)
        counts.append(len(ticked(state, path, stats)))
    assert counts == [1, 1, 0, 0, 1]


def test_an_interval_with_no_query_shows_a_zero_hit_rate(no_vllm_env: None, tmp_path: Path) -> None:
    with captured("APIServer", tmp_path) as (log, path):
        state = StateView(sim_config(RUNS["tiny"]), log)
        serve(state.metrics, prompt=0, generated=40)
        (line,) = ticked(state, path, StatsLog(state))  # type: ignore[arg-type]
    assert line.endswith("GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%")


def speculating(log: LogWriter, tokens: int = 2) -> tuple[StateView, SpecDecode]:
    cfg = sim_config(RUNS["tiny-ngram"])
    spec = SpecDecode("ngram", tokens, base=0.8)
    return StateView(cfg, log, scheduler=SchedulerView(spec)), spec


def drafted(spec: SpecDecode, drafts: int, accepted_each: int) -> None:
    """`drafts` decode steps that accepted the first `accepted_each` draft tokens each."""
    stats = spec.stats
    stats.drafts += drafts
    stats.draft_tokens += drafts * spec.k
    stats.accepted += drafts * accepted_each
    for position in range(accepted_each):
        stats.per_position[position] += drafts


def shape(text: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?", "N", text)


def test_the_spec_decoding_line_follows_the_engine_line_as_in_the_real_ngram_run(
    no_vllm_env: None, tmp_path: Path
) -> None:
    """tiny-ngram.log: 8 drafts of 2 tokens, none accepted. vLLM divides by the time elapsed (10.74 s
    there: 1.49 tokens/s); the simulator by its interval."""
    with captured("APIServer", tmp_path) as (log, path):
        state, spec = speculating(log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        state.metrics.running = 4
        serve(state.metrics, prompt=7460, generated=11901, queries=1000, hits=934)
        drafted(spec, drafts=8, accepted_each=0)
        engine, speculation = ticked(state, path, stats)
    real = real_lines("tiny-ngram", "metrics.py:120")[0]
    assert speculation == (
        "SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted "
        "throughput: 1.60 tokens/s, Accepted: 0 tokens, Drafted: 16 tokens, Per-position acceptance rate: "
        "0.000, 0.000, Avg Draft acceptance rate: 0.0%"
    )
    assert shape(speculation) == shape(real)
    assert engine == real_lines("tiny-ngram", "loggers.py:310")[0]


def test_acceptance_figures_are_the_intervals_own(no_vllm_env: None, tmp_path: Path) -> None:
    """SpecDecodingLogging resets after each line: the mean length, the rate and every per-position
    rate count this interval's drafts only (v1/spec_decode/metrics.py:82-116)."""
    with captured("APIServer", tmp_path) as (log, path):
        state, spec = speculating(log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        serve(state.metrics, prompt=10, generated=30)
        drafted(spec, drafts=10, accepted_each=2)
        _, first = ticked(state, path, stats)
        serve(state.metrics, prompt=0, generated=10)
        drafted(spec, drafts=10, accepted_each=0)
        _, second = ticked(state, path, stats)
    assert (
        "Mean acceptance length: 3.00" in first
        and "rate: 1.000, 1.000, Avg Draft acceptance rate: 100.0%" in first
    )
    assert (
        "Mean acceptance length: 1.00" in second
        and "rate: 0.000, 0.000, Avg Draft acceptance rate: 0.0%" in second
    )


def test_no_spec_line_for_an_interval_without_drafts(no_vllm_env: None, tmp_path: Path) -> None:
    with captured("APIServer", tmp_path) as (log, path):
        state, spec = speculating(log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        serve(state.metrics, prompt=10, generated=30)
        drafted(spec, drafts=3, accepted_each=1)
        assert len(ticked(state, path, stats)) == 2
        serve(state.metrics, prompt=5, generated=0)  # a prefill-only interval
        assert [line[:10] for line in ticked(state, path, stats)] == ["Engine 000"]


def test_the_interval_is_vllm_log_stats_interval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_env(monkeypatch, {"VLLM_LOG_STATS_INTERVAL": "2.5"})
    with captured("APIServer", tmp_path) as (log, path):
        state = StateView(sim_config(RUNS["tiny"]), log)
        stats = StatsLog(state)  # type: ignore[arg-type]
        serve(state.metrics, prompt=25, generated=50)
        (line,) = ticked(state, path, stats)
    assert stats.interval_s == 2.5
    assert line.startswith(
        "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s"
    )
