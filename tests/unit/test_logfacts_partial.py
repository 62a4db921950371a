"""Partial and decorated logs (issue #16 point 3): what the log shows is read, nothing else."""

from __future__ import annotations

import html

from launcher.logfacts import parse_text

API_SERVER_CMD = ("+ python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct "
                  "--port 8001 --tensor-parallel-size 2 --enforce-eager")
BANNER_06 = "INFO 12-20 20:25:46 api_server.py:528] vLLM API server version 0.6.4"


def test_echoed_api_server_command_before_the_banner_is_read() -> None:
    facts, _ = parse_text(f"{API_SERVER_CMD}\n{BANNER_06}\n")
    assert (facts.model, facts.served_port, facts.tensor_parallel_size, facts.enforce_eager) == (
        "Qwen/Qwen2.5-7B-Instruct", 8001, 2, True)
    assert facts.vllm_version == "0.6.4" and facts.startups_seen == 1


def test_echoed_command_is_outranked_by_what_vllm_built() -> None:
    cfg = ("INFO 12-20 20:25:47 llm_engine.py:249] Initializing an LLM engine (v0.6.4) with config: "
           "model='Qwen/Qwen2.5-7B-Instruct', tensor_parallel_size=4, enforce_eager=False")
    facts, _ = parse_text(f"{API_SERVER_CMD}\n{BANNER_06}\n{cfg}\n")
    assert (facts.tensor_parallel_size, facts.enforce_eager, facts.served_port) == (4, False, 8001)


def test_vllm_serve_command_with_equals_and_short_flags() -> None:
    facts, _ = parse_text("$ vllm serve meta-llama/Llama-3.1-8B --port=8002 -tp 4\n")
    got = (facts.model, facts.served_port, facts.tensor_parallel_size)
    assert got == ("meta-llama/Llama-3.1-8B", 8002, 4)
    assert facts.enforce_eager is None and facts.max_model_len is None  # not shown: never guessed


def test_html_escaped_engine_config_line_is_read() -> None:
    line = ("(EngineCore_DP0 pid=4312) INFO 11-29 06:26:01 [core.py:77] Initializing a V1 LLM engine "
            "(v0.11.0) with config: model='Qwen/Qwen3-8B', tensor_parallel_size=1, enforce_eager=False, "
            "compilation_config={'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
            "'cudagraph_capture_sizes': [4, 2, 1]}")
    facts, _ = parse_text(html.escape(line, quote=True) + "\n")
    assert facts.model == "Qwen/Qwen3-8B"
    assert facts.cudagraph_mode == "FULL_AND_PIECEWISE" and facts.capture_sizes == [1, 2, 4]


def test_ray_worker_prefix_names_the_failing_process() -> None:
    text = ("(RayWorkerWrapper pid=2231, ip=10.0.0.7) ERROR 03-02 10:11:12 [worker_base.py:620] "
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    facts, _ = parse_text(text)
    assert (facts.failure_kind, facts.failure_proc) == ("oom", "RayWorkerWrapper")


def test_v0_capture_start_says_not_eager() -> None:
    text = ("INFO 12-20 20:26:10 model_runner.py:1402] Capturing cudagraphs for decoding. This may lead to "
            "unexpected consequences if the model is not static.\n")
    facts, _ = parse_text(text)
    assert facts.enforce_eager is False


def test_capture_bars_alone_say_not_eager() -> None:
    """An excerpt with no config line: the capture bars (V0 `Capturing CUDA graph shapes`) prove graphs."""
    text = "Capturing CUDA graph shapes:  20%|██        | 7/35 [00:01<00:05,  5.71it/s]\n"
    facts, _ = parse_text(text)
    assert facts.enforce_eager is False and facts.cudagraph_mode is None


def test_graph_capturing_finished_alone_says_not_eager() -> None:
    facts, _ = parse_text("INFO 12-20 20:26:15 model_runner.py:1527] Graph capturing finished in 5 secs.\n")
    assert facts.enforce_eager is False
