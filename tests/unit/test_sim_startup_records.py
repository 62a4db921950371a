"""The simulated engine's startup (`vllm_sim/startup.py`, `notes.py`, `vllm_text.py`) against the real
vLLM 0.26.0 runs it imitates: the same records in the same order, word for word where no host value
or timing is in them, and the same refusal where the real start failed. In-process, no wait: the
`wait` seam does nothing, so each startup takes milliseconds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.logfacts import parse_text
from tests.real_runs import RUNS, Record, captured, records, sim_config, use_env
from vllm_sim.config import SimConfig
from vllm_sim.ranks import LocalRanks
from vllm_sim.startup import Phase, Startup, StartupFailed
from vllm_sim.versions import V026, V033, Dialect

# Records whose text carries a host value, a timing, a hash or the memory model's estimate: the
# simulator's are stand-ins of the same shape, never the real figures.
VARYING = {
    "parallel_state.py:1615",  # the host's address and a free port
    "weight_utils.py:869",  # checkpoint size and available RAM
    "default_loader.py:430", "model_runner.py:305", "gpu_model_runner.py:5347",  # load times
    "backends.py:1094", "decorators.py:708",  # compile cache hashes
    "backends.py:1155", "backends.py:393", "monitor.py:53", "monitor.py:81",  # compile times
    "core.py:340", "core.py:347",  # init time
    "gpu_worker.py:479", "gpu_worker.py:560", "gpu_worker.py:575", "gpu_worker.py:793", "gpu_worker.py:857",
    "kv_cache_utils.py:2177", "kv_cache_utils.py:2178",  # KV pool
    "model_runner.py:747", "gpu_model_runner.py:6737", "gpu_model_runner.py:6844",  # graph memory
}  # fmt: skip


class Hung(Exception):
    """What the test's `hang` raises: the real one never returns."""


def hang() -> None:
    raise Hung


def start(
    cfg: SimConfig, tmp_path: Path, dialect: Dialect = V026
) -> tuple[list[Record], StartupFailed | None]:
    """Run the whole startup; its EngineCore records and the failure it raised, if any."""
    failed = None
    with captured("EngineCore", tmp_path) as (log, path):
        ranks = LocalRanks(log, lambda s: None, lambda util, rank: None)
        try:
            Startup(cfg, dialect, log, ranks, wait=lambda s: None, hang=hang).run()
        except StartupFailed as err:
            failed = err
        text = path.read_text(encoding="utf-8")
    return records(text, "EngineCore"), failed


def real_startup(run_name: str) -> list[Record]:
    """The engine's records of a real run until the API server says it serves (`Supported tasks`)."""
    found = []
    for record in records(RUNS[run_name].text()):
        if record.process == "APIServer" and record.text.startswith("Supported tasks"):
            break
        if record.process == "EngineCore":
            found.append(record)
    return found


def shape(text: str) -> str:
    """A record with its figures and hashes blanked: `GPU KV cache size: N,N,N tokens`."""
    return re.sub(r"\d+(?:\.\d+)?", "N", re.sub(r"[0-9a-f]{10,}", "HASH", text))


def simulated(run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Record]:
    use_env(monkeypatch, RUNS[run_name].env)
    found, failed = start(sim_config(RUNS[run_name]), tmp_path)
    assert failed is None, failed
    return found


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager"])
def test_the_engine_logs_a_real_runs_startup_records_in_its_order(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = simulated(run_name, tmp_path, monkeypatch)
    assert [(r.level, r.src) for r in sim] == [(r.level, r.src) for r in real_startup(run_name)]


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager"])
def test_every_record_without_a_host_value_is_the_real_one_word_for_word(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine config line included: every field the real 0.26.0 printed for these flags."""
    sim = simulated(run_name, tmp_path, monkeypatch)
    pairs = zip(real_startup(run_name), sim, strict=True)
    assert [(r.src, s.text) for r, s in pairs if r.src not in VARYING] == [
        (r.src, r.text) for r in real_startup(run_name) if r.src not in VARYING
    ]


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager"])
def test_records_with_host_values_have_the_real_ones_shape(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = simulated(run_name, tmp_path, monkeypatch)
    pairs = zip(real_startup(run_name), sim, strict=True)
    assert [(r.src, shape(s.text)) for r, s in pairs if r.src in VARYING] == [
        (r.src, shape(r.text)) for r in real_startup(run_name) if r.src in VARYING
    ]


def kv_figures(found: list[Record]) -> tuple[int, int, float]:
    """(tokens, max_model_len, concurrency) of the two 0.26.0 KV lines."""
    size = next(r.text for r in found if r.text.startswith("GPU KV cache size"))
    conc = next(r.text for r in found if r.text.startswith("Maximum concurrency"))
    tokens = int(re.search(r"([\d,]+) tokens", size)[1].replace(",", ""))  # type: ignore[index]
    match = re.search(r"for ([\d,]+) tokens per request: ([\d.]+)x", conc)
    assert match
    return tokens, int(match[1].replace(",", "")), float(match[2])


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager"])
def test_the_concurrency_is_the_kv_tokens_over_the_model_length_as_in_the_real_run(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM divides the pool by max_model_len (one full-attention group): 28,947,616 / 2,048 = 14134.58."""
    for found in (real_startup(run_name), simulated(run_name, tmp_path, monkeypatch)):
        tokens, max_len, concurrency = kv_figures(found)
        assert max_len == 2048
        assert concurrency == round(tokens / max_len, 2)


FACT_KEYS = (
    "model", "tensor_parallel_size", "max_model_len", "model_runner", "enforce_eager",
    "cudagraph_captured", "graphs_captured", "graphs_captured_by_mode", "speculative_config",
)  # fmt: skip


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager"])
def test_the_launcher_reads_the_same_decisions_from_the_simulated_startup(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log reader's facts of the engine's lines: runner, eager, graphs per mode, as the real run."""
    simulated(run_name, tmp_path, monkeypatch)
    sim_facts, _ = parse_text((tmp_path / "EngineCore.log").read_text(encoding="utf-8"))
    real_lines = [line for line in RUNS[run_name].text().splitlines() if not line.startswith("(APIServer")]
    real_facts, _ = parse_text("\n".join(real_lines))
    assert {k: getattr(sim_facts, k) for k in FACT_KEYS} == {k: getattr(real_facts, k) for k in FACT_KEYS}


def real_error(run_name: str) -> str:
    """The last line of the engine's traceback in a failed real run."""
    return next(r.text for r in reversed(records(RUNS[run_name].text(), "EngineCore")) if r.level == "ERROR")


@pytest.mark.parametrize(("run_name", "where"), [("free-memory", "free_memory"), ("kv-small", "kv_cache")])
def test_a_start_the_real_vllm_refused_fails_with_its_exception_line_after_its_records(
    run_name: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, RUNS[run_name].env)
    found, failed = start(sim_config(RUNS[run_name]), tmp_path)
    assert failed is not None
    assert (failed.last_line, failed.where, failed.rank) == (real_error(run_name), where, None)
    real = [r for r in records(RUNS[run_name].text(), "EngineCore") if r.level != "ERROR"]
    assert [(r.level, r.src) for r in found] == [(r.level, r.src) for r in real[: len(found)]]
    assert len(found) == len(real)  # nothing after the failure: the traceback is the engine's to log


@pytest.mark.parametrize("phase", list(Phase))
def test_an_injected_crash_fails_the_start_in_its_phase(
    phase: Phase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {})
    found, failed = start(sim_config(RUNS["tiny"], "--sim-crash-at", phase.value), tmp_path)
    assert failed is not None
    assert (
        failed.last_line == f"RuntimeError: [vllm-sim] injected crash during {phase} (--sim-crash-at {phase})"
    )
    assert not any(r.text.startswith("init engine") for r in found)
    loaded = any(r.text.startswith("Model loading took") for r in found)
    assert loaded is (phase != Phase.LOADING)


@pytest.mark.parametrize(
    ("phase", "last_src"), [("loading", "gpu_worker.py:378"), ("capture", "cutedsl_warmup.py:101")]
)
def test_an_injected_hang_stops_the_start_where_its_phase_begins(
    phase: str, last_src: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {})
    with captured("EngineCore", tmp_path) as (log, path):
        ranks = LocalRanks(log, lambda s: None, lambda util, rank: None)
        startup = Startup(
            sim_config(RUNS["tiny"], "--sim-hang-at", phase), V026, log, ranks, lambda s: None, hang
        )
        with pytest.raises(Hung):
            startup.run()
        assert records(path.read_text(encoding="utf-8"))[-1].src == last_src


def test_a_capture_oom_names_the_gpu_and_what_the_process_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's message, as vllm-facts.md §5 quotes it: the total, what is free, what this process has."""
    use_env(monkeypatch, {})
    found, failed = start(sim_config(RUNS["tiny"], "--sim-oom-at-capture"), tmp_path)
    assert failed is not None and failed.where == ""
    assert failed.last_line == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 139.80 GiB of which 111.44 GiB is free. Including non-PyTorch memory, this process has 28.36 GiB "
        "memory in use."
    )  # 139.8 x 0.2 = 27.96 GiB asked, 0.4 more in the capture
    assert not any(r.text.startswith("Graph capturing finished") for r in found)


@pytest.mark.parametrize("phase", ["loading", "warmup"])
def test_the_kernel_marker_is_logged_once_in_its_phase(
    phase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {})
    flags = ("--sim-marker", "IQ4XS_BMMVQ_READY", "--sim-marker-phase", phase)
    found, _ = start(sim_config(RUNS["tiny"], *flags), tmp_path)
    texts = [r.text for r in found]
    assert texts.count("IQ4XS_BMMVQ_READY") == 1
    after = texts[texts.index("IQ4XS_BMMVQ_READY") - 1]
    assert after.startswith("Model loading took" if phase == "loading" else "Skipping CuTeDSL warmup")


def test_a_capture_fallback_captures_only_sizes_one_and_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {})
    found, _ = start(sim_config(RUNS["tiny"], "--sim-capture-fallback"), tmp_path)
    facts, _ = parse_text((tmp_path / "EngineCore.log").read_text(encoding="utf-8"))
    assert facts.graphs_captured_by_mode == {"PIECEWISE": 2, "FULL": 2}
    assert "'cudagraph_capture_sizes': [1, 2]" in found[0].text


def test_a_mode_none_start_without_eager_warns_that_capture_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.26.0 has only the V1 runner's wording, for both runners (scripts/real-vllm/README.md)."""
    use_env(monkeypatch, {})
    found, _ = start(sim_config(RUNS["tiny"], "--compilation-config", '{"cudagraph_mode": "NONE"}'), tmp_path)
    warnings = [r.text for r in found if r.level == "WARNING"]
    assert warnings == [
        "Skipping CUDA graph capture. To turn on CUDA graph capture, ensure `cudagraph_mode` was not "
        "manually set to `NONE`"
    ]
    assert not any(r.text.startswith("Capturing") or "Graph capturing" in r.text for r in found)


# vLLM 0.33.0 (vllm-facts.md §2, §11): one KV line, the JIT warm-up, `[backbone]` compile lines, and V2's
# graph-memory capture before the KV cache; none of 0.26.0's informational notes.
def v033(*flags: str) -> SimConfig:
    return sim_config(RUNS["tiny"], "--sim-vllm-version", "0.33", *flags)


def test_033_logs_one_kv_line_and_the_jit_warmup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(monkeypatch, {})
    found, _ = start(v033(), tmp_path, V033)
    texts = [r.text for r in found]
    kv = [t for t in texts if t.startswith("GPU KV cache size")]
    assert len(kv) == 1 and ", Maximum concurrency for 2,048 tokens per request: " in kv[0]
    assert "JIT kernel warmup starting." in texts
    assert "[backbone] Starting torch.compile" in texts
    assert not any(
        t.startswith(("Using FlashAttention version", "cuteDSL", "Free memory on device")) for t in texts
    )


def test_033_captures_once_before_the_kv_cache_to_measure_graph_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {})
    found, _ = start(v033(), tmp_path, V033)
    texts = [r.text for r in found]
    finished = [i for i, t in enumerate(texts) if t.startswith("Graph capturing finished")]
    kv = texts.index(next(t for t in texts if t.startswith("Available KV cache memory")))
    assert len(finished) == 2 and finished[0] < kv < finished[1]
    assert texts[kv + 1].startswith("CUDA graph memory profiling is enabled")
    assert texts[-2].startswith("CUDA graph pool memory: ") and texts[-2].endswith(
        "difference: 0.00 GiB (0.0%)."
    )


def test_033_eager_has_neither_warmup_nor_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(monkeypatch, {})
    found, _ = start(v033("--enforce-eager"), tmp_path, V033)
    texts = [r.text for r in found]
    assert not any(t.startswith(("JIT kernel warmup", "Graph capturing", "CUDA graph")) for t in texts)
    assert not any("torch.compile" in t for t in texts[1:])  # the config line aside
    assert texts[-1].startswith("init engine (profile, create kv cache, warmup model) took ")
    assert "(compilation:" not in texts[-1]


def test_the_init_line_counts_compilation_only_when_the_engine_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {})
    compiled, _ = start(sim_config(RUNS["tiny"]), tmp_path / "compiled")
    eager, _ = start(sim_config(RUNS["eager"]), tmp_path / "eager")
    assert next(r for r in compiled if r.text.startswith("init engine")).src == "core.py:340"
    assert re.search(
        r"took [\d.]+ s \(compilation: [\d.]+ s\)$", next(r.text for r in compiled if "init engine" in r.text)
    )
    assert next(r for r in eager if r.text.startswith("init engine")).src == "core.py:347"
