"""Line cleaning, prefix parsing, reprs and failure ranking on single lines from real-log shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.logfacts import configline, parse_text
from launcher.logfacts.failure import FailureKind, classify, process_exit
from launcher.logfacts.lines import (
    brackets_balanced,
    is_record_like,
    leading_proc,
    parse_segment,
    strip_ansi,
    strip_outer,
)
from launcher.logfacts.markers import BadMarker, MarkerSet
from launcher.logfacts.pyrepr import parse_dict, parse_namespace, value_after

KV = "GPU KV cache size: 789,184 tokens"
REC = f"(EngineCore pid=4312) INFO 11-29 06:26:59 [kv_cache_utils.py:1147] {KV}"


@pytest.mark.parametrize(
    "raw",
    [
        f"\x1b[1;36m(EngineCore pid=4312)\x1b[0;0m INFO 11-29 06:26:59 [kv_cache_utils.py:1147] {KV}",
        f"^[[1;36m(EngineCore pid=4312)^[[0;0m INFO 11-29 06:26:59 [kv_cache_utils.py:1147] {KV}",
        f"(EngineCore pid=4312) \x1b[32mINFO\x1b[0m \x1b[90m11-29 06:26:59\x1b[0m [kv_cache_utils.py:1147] {KV}",
    ],
)
def test_colours_real_and_literal_are_removed(raw: str) -> None:
    rec = parse_segment(strip_outer(strip_ansi(raw)))
    assert (rec.proc, rec.pid, rec.level, rec.msg) == ("EngineCore", 4312, "INFO", KV)
    assert rec.ts == "11-29 06:26:59"


@pytest.mark.parametrize(
    "raw",
    [
        f"vllm-1  | {REC}",
        f"vllm_1    | {REC}",
        f"Nov 29 06:26:59 gpu01 vllm[4101]: {REC}",
        f"2026-11-29T06:26:59+0000 gpu01 vllm[4101]: {REC}",
        f"2026-11-29T06:26:59.123456789Z {REC}",
        f"[2026-02-24T20:21:58Z] {REC}",
        f"Nov 29 06:26:59 gpu01 docker[811]: vllm-1  | {REC}",
    ],
)
def test_outer_prefixes_are_removed(raw: str) -> None:
    assert strip_outer(raw).startswith("(EngineCore pid=4312) INFO")


def test_unprefixed_lines_keep_their_text() -> None:
    for line in (
        "INFO:     Application startup complete.",
        "KeyError: 'invalid tool call parser: x'",
        "Loading safetensors checkpoint shards:  20% Completed | 1/5 [00:02<00:09,  2.41s/it]",
    ):
        assert strip_outer(line) == line


@pytest.mark.parametrize(
    ("raw", "proc", "level", "msg"),
    [
        (
            "INFO 12-20 20:25:46 worker.py:241] Memory profiling takes 1.52 seconds",
            None,
            "INFO",
            "Memory profiling takes 1.52 seconds",
        ),
        (
            "(VllmWorker rank=3 pid=2445158) INFO 05-10 16:00:15 [gpu_model_runner.py:1686] "
            "Graph capturing finished in 9 secs",
            "VllmWorker rank=3",
            "INFO",
            "Graph capturing finished in 9 secs",
        ),
        (
            "(RayWorkerProc pid=3865416, ip=192.168.10.220) (Worker_DP1_TP1_EP3 pid=2784026) INFO 06-10 11:10:49 "
            "[gpu_worker.py:480] Available KV cache memory: 25.94 GiB [repeated 3x across cluster]",
            "Worker_DP1_TP1_EP3",
            "INFO",
            "Available KV cache memory: 25.94 GiB",
        ),
        (
            "(APIServer pid=3101) INFO:     Application startup complete.",
            "APIServer",
            "INFO",
            "Application startup complete.",
        ),
        (
            "(APIServer pid=223598) RuntimeError: Engine core initialization failed. See root cause above.",
            "APIServer",
            None,
            "RuntimeError: Engine core initialization failed. See root cause above.",
        ),
        (
            "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address in use",
            None,
            "ERROR",
            "[Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address in use",
        ),
    ],
)
def test_prefix_forms(raw: str, proc: str | None, level: str | None, msg: str) -> None:
    rec = parse_segment(raw)
    assert (rec.proc, rec.level, rec.msg) == (proc, level, msg)


def test_bar_glued_to_a_record_keeps_both() -> None:
    seg = (
        "Capturing CUDA graph shapes:   0%|          | 0/11 [00:00<?, ?it/s]"
        "(VllmWorkerProcess pid=21013) INFO 04-24 08:27:56 [model_runner.py:1456] "
        "Capturing cudagraphs for decoding."
    )
    rec = parse_segment(seg)
    assert rec.proc == "VllmWorkerProcess" and rec.msg == "Capturing cudagraphs for decoding."
    assert leading_proc(seg) is None and leading_proc("(Worker_TP0 pid=3) Capturing") == "Worker_TP0"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("(EngineCore pid=1) INFO 11-29 06:26:59 [core.py:1] x", True),
        ("INFO:     Started server process [1]", True),
        ("Traceback (most recent call last):", True),
        ('  File "/x.py", line 3, in f', True),
        ("ValueError: boom", True),
        ("Capturing CUDA graphs (FULL): 100%|██████████| 51/51 [00:02<00:00, 21.90it/s]", True),
        ("[transformers] `Qwen2VLImageProcessorFast` is deprecated", True),
        ("", True),
        ("_stream_outputs=True, enable_prefix_caching=None, chunked_prefill_enabled=True", False),
        (" kv_cache_dtype=auto, device_config=cuda", False),
        ("16, 224, 232, 240, 248, 256], 'cudagraph_copy_inputs': False", False),
        ("5x", False),
    ],
)
def test_record_likeness_decides_wrapped_continuations(line: str, expected: bool) -> None:
    assert is_record_like(line) is expected


def test_brackets_balance_ignores_quoted_brackets() -> None:
    assert brackets_balanced("{'a': '[(', 'b': [1, 2]}")
    assert not brackets_balanced("{'a': [1, 2")


def test_parse_dict_keeps_non_literal_values() -> None:
    args = parse_dict(
        "{'port': 8100, 'api_key': '***', 'mode': <CompilationMode.VLLM_COMPILE: 3>, 'x': [1, 2]}"
    )
    assert args == {"port": 8100, "api_key": "***", "mode": "CompilationMode.VLLM_COMPILE: 3", "x": [1, 2]}
    assert parse_dict("not a dict") is None
    assert parse_dict("{'a': __import__('os').system('true')}") == {"a": "__import__('os').system('true')"}


def test_parse_namespace() -> None:
    ns = parse_namespace(
        "Namespace(port=8000, tensor_parallel_size=2, model='m', fn=<function serve at 0x7f>)"
    )
    assert ns == {"port": 8000, "tensor_parallel_size": 2, "model": "m", "fn": "function serve at 0x7f"}


def test_value_after_balances_brackets() -> None:
    cfg = "speculative_config=SpeculativeConfig(method='mtp', sizes=(1, 2)), tokenizer='x'"
    assert value_after(cfg, "speculative_config") == "SpeculativeConfig(method='mtp', sizes=(1, 2))"


@pytest.mark.parametrize(
    ("cfg", "mode"),
    [
        ("'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>", "FULL_AND_PIECEWISE"),
        ('"cudagraph_mode":[2,1]', "FULL_AND_PIECEWISE"),
        ('"cudagraph_mode":[2,0]', "FULL_DECODE_ONLY"),
        ('"cudagraph_mode":1', "PIECEWISE"),
        ("'cudagraph_mode': 'full_decode_only'", "FULL_DECODE_ONLY"),
        ("'cudagraph_mode': None", "NONE"),
        ('"use_cudagraph":true', None),
    ],
)
def test_cudagraph_mode_forms(cfg: str, mode: str | None) -> None:
    assert configline.cudagraph_mode(cfg) == mode


def test_engine_config_sizes_sorted_from_either_form() -> None:
    old_form = configline.from_engine_config('x, "cudagraph_capture_sizes":[8,4,2,1]')
    assert old_form["capture_sizes"] == [1, 2, 4, 8]
    assert configline.from_engine_config("'cudagraph_capture_sizes': [1, 2]")["capture_sizes"] == [1, 2]


def test_command_line_flags() -> None:
    assert configline.from_command(" Qwen/Qwen3-8B -tp 4 --port=8100 --enforce-eager --max-num-seqs 8") == {
        "model": "Qwen/Qwen3-8B",
        "tensor_parallel_size": 4,
        "served_port": 8100,
        "enforce_eager": True,
        "max_num_seqs": 8,
    }
    module_form = configline.from_command(
        "-m vllm.entrypoints.openai.api_server --model=M --gpu-memory-utilization 0.9"
    )
    assert module_form == {"model": "M", "gpu_memory_utilization": 0.9}
    assert configline.from_command("serve --model") == {"model": "serve"}  # no value after --model
    assert configline.from_command("M --port x --max_num_seqs 4 'unclosed") == {
        "model": "M",
        "max_num_seqs": 4,
    }


def test_echoed_args_are_typed_and_secrets_and_nones_dropped() -> None:
    echoed = {"model_tag": "M", "port": 8100, "max_num_seqs": True, "gpu_memory_utilization": 1,
              "enforce_eager": False, "served_model_name": "m", "quantization": None,
              "tool_call_parser": "***"}  # fmt: skip
    assert configline.from_args(echoed) == {
        "model": "M", "served_port": 8100, "gpu_memory_utilization": 1.0, "enforce_eager": False,
        "served_model_name": ["m"],
    }  # fmt: skip


def _cause(raw: str, after_traceback: bool = False) -> str | None:
    cause = classify(parse_segment(raw), after_traceback)
    return None if cause is None else str(cause.kind)


def test_failure_needs_an_error_line() -> None:
    summary = (
        "(EngineCore pid=1) INFO 11-29 06:27:08 [gpu_worker.py:1066] Free memory on device "
        "(138.84/139.81 GiB) on startup. Desired GPU memory utilization is (0.92, 128.63 GiB)."
    )
    assert _cause(summary) is None
    assert (
        _cause(summary.replace("INFO", "ERROR").replace(" on startup.", " on startup is less than x"))
        == FailureKind.FREE_MEMORY
    )
    code_line = '(APIServer pid=1)     raise RuntimeError("Engine core initialization failed. "'
    assert _cause(code_line) is None  # traceback source, not the exception
    generic = "RuntimeError: Engine core initialization failed. See root cause above."
    assert _cause(generic) == FailureKind.ENGINE_INIT
    assert _cause("(EngineCore pid=1) WARNING 11-29 06:27:08 [x.py:1] CUDA out of memory, retrying") is None


def test_uncaught_exception_counts_only_after_a_traceback() -> None:
    assert _cause("OSError: model not found") is None
    assert _cause("OSError: model not found", after_traceback=True) == FailureKind.OTHER


def test_process_exit_lines() -> None:
    assert process_exit("vllm.service: Main process exited, code=exited, status=1/FAILURE") == 1
    assert process_exit("vllm.service: Main process exited, code=exited, status=0/SUCCESS") == 0
    assert process_exit("vllm-1 exited with code 137") == 137
    assert process_exit("Engine 000: Avg prompt throughput") is None


def test_markers_prefilter_or_fall_back_to_every_line() -> None:
    patterns = ["IQ4XS_BMMVQ_READY", "^kernel ready$", r"\bREADY\b", r"(^a|b$)\\b", r"[^$]x\[^"]
    markers = MarkerSet.build(patterns)
    assert [rx.pattern for rx in markers.scan] == [
        "IQ4XS_BMMVQ_READY",
        "kernel ready",
        "READY",
        r"(a|b)\\b",
        r"[^$]x\[",
    ]
    assert not markers.every_line
    assert MarkerSet.build(["(?<=x)READY"]).every_line and MarkerSet.build(["^$"]).every_line
    with pytest.raises(BadMarker):
        MarkerSet.build(["("])


# ---- reprs a log may hold: read as data, never run, never a traceback ------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'a': " + "[" * 5000 + "]" * 5000 + "}", None),  # deeper than the parser recurses
        ("{'a': 1" + " " * 1_000_001 + "}", None),  # past the size any real args line has
        ("{'f': lambda: 0, 'g': 2}", {"f": "lambda: 0", "g": 2}),  # kept as its source text
        ("{1: 'a', None: 2}", {"1": "a", "None": 2}),  # keys become text
        ("{x: 1, 'y': 2}", {"y": 2}),  # a key that is no literal is dropped, the rest kept
        ("{k: v for k in x}", None),
        ("{1, 2}", None),  # a set is no dict
        ("}{", None),
        ("{'a': 1", None),
        ("non-default args: {'a': '}'} [repeated 3x across cluster]", {"a": "}"}),
        ("{'a': 1e400, 'b': '\\x00'}", {"a": float("inf"), "b": "\x00"}),
    ],
)
def test_hostile_dict_reprs(text: str, expected: dict[str, object] | None) -> None:
    assert parse_dict(text) == expected


def test_a_namespace_reads_keywords_only_and_runs_nothing() -> None:
    assert parse_namespace("Namespace()") == {}
    assert parse_namespace("Namespace(1, port=2, **kw)") == {"port": 2}
    assert parse_namespace("NotNamespace(a=1)") is None and parse_namespace("Namespace(a=") is None
    sneaky = parse_namespace("Namespace(port=__import__('os').system('touch /tmp/x'))")
    assert sneaky == {"port": "__import__('os').system('touch /tmp/x')"}


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("x='a,b', y=1", "x", "'a,b'"),  # a comma inside quotes does not end it
        ("x=')', y=2", "x", "')'"),  # nor a bracket inside quotes
        ("a=[1, (2, 3)], b=4", "a", "[1, (2, 3)]"),
        ("a=1, b=2", "b", "2"),  # the last key runs to the end
        ("X(a=1, b=(2, 3))", "a", "1"),  # the closing bracket of the repr around it ends it
        ("a=1", "speculative_config", None),
    ],
)
def test_value_after_finds_the_values_source_text(text: str, key: str, value: str | None) -> None:
    assert value_after(text, key) == value


# ---- facts from the engine config line, the echoed args and an echoed command line ---------------------


REAL = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26"


def config_of(log: str) -> dict[str, object]:
    line = next(
        text for text in (REAL / log).read_bytes().decode("utf-8").split("\n") if "with config:" in text
    )
    return configline.from_engine_config(line.split("with config: ", 1)[1])


def test_the_recorded_config_line_states_what_vllm_built() -> None:
    cfg = config_of("tiny.log")
    assert cfg["capture_sizes"] == [1, 2, 4, 8, *range(16, 257, 8), *range(272, 513, 16)]
    assert {k: v for k, v in cfg.items() if k != "capture_sizes"} == {
        "model": "/root/tiny", "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
        "data_parallel_size": 1, "max_model_len": 2048, "enforce_eager": False, "kv_cache_dtype": "auto",
        "served_model_name": ["tiny"], "cudagraph_mode": "FULL_AND_PIECEWISE", "max_capture_size": 512,
    }  # fmt: skip
    assert "speculative_config" not in cfg  # `speculative_config=None` states no speculation


def test_the_recorded_ngram_config_keeps_its_speculative_config_whole() -> None:
    cfg = config_of("tiny-ngram.log")
    assert cfg["speculative_config"] == "SpeculativeConfig(method='ngram', model=None, num_spec_tokens=2)"
    assert (cfg["capture_sizes"], cfg["max_capture_size"]) == ([1, 2, 4, 8], 8)


def test_args_of_the_wrong_type_are_dropped_not_converted() -> None:
    echoed = {"port": 8100.0, "max_model_len": "4096", "tensor_parallel_size": True,
              "gpu_memory_utilization": True, "enforce_eager": 1, "kv_cache_dtype": 8}  # fmt: skip
    assert configline.from_args(echoed) == {}


def test_args_keep_a_speculative_dict_and_name_a_list_of_served_names() -> None:
    echoed = {"model": "m", "model_tag": "ignored", "speculative_config": {"method": "ngram"},
              "served_model_name": ["a", 2]}  # fmt: skip
    assert configline.from_args(echoed) == {
        "model": "m", "speculative_config": {"method": "ngram"}, "served_model_name": ["a", "2"],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("command", "facts"),
    [
        ("m --port=", {"model": "m"}),  # an empty value states nothing
        ("m --tensor_parallel_size=2", {"model": "m", "tensor_parallel_size": 2}),  # underscores, as argparse
        ("m -tp", {"model": "m"}),  # the flag ends the line
        ("m --max-model-len $LEN", {"model": "m"}),  # an unexpanded variable is no number
        ("--port 8000 m", {"served_port": 8000}),  # a flag first: no positional model
        ("m -pp 2 -dp 4", {"model": "m", "pipeline_parallel_size": 2, "data_parallel_size": 4}),
    ],
)
def test_echoed_command_lines(command: str, facts: dict[str, object]) -> None:
    assert configline.from_command(command) == facts


def test_secrets_are_masked_and_settings_that_merely_mention_tokens_are_not() -> None:
    """vLLM's `non-default args` shows `api_key` and `hf_token` in clear: those are masked; a key that only
    contains the word (`max_num_batched_tokens`, `tokenizer`) is a setting the operator needs to read."""
    echoed = {"api_key": ["sk-1"], "hf_token": "hf_x", "client_secret": "s", "db_password": "p",
              "max_num_batched_tokens": 8192, "tokenizer": "org/tok", "skip_tokenizer_init": True,
              "tokenizer_mode": "auto", "num_speculative_tokens": 2, "api_key_file": None}  # fmt: skip
    assert configline.redact(echoed) == {
        "api_key": "***", "hf_token": "***", "client_secret": "***", "db_password": "***",
        "max_num_batched_tokens": 8192, "tokenizer": "org/tok", "skip_tokenizer_init": True,
        "tokenizer_mode": "auto", "num_speculative_tokens": 2, "api_key_file": None,
    }  # fmt: skip
    line = "(APIServer pid=1) INFO 11-30 10:00:01 [api_utils.py:273] non-default args: {'model_tag': 'm', "
    facts = parse_text(line + "'max_num_batched_tokens': 8192, 'api_key': ['sk-1']}\n")[0]
    assert facts.non_default_args == {"model_tag": "m", "max_num_batched_tokens": 8192, "api_key": "***"}
