"""The decisions behind the facts that follow from other facts (launcher/logfacts/derive.py, the
capture's settling, the ranks of inferred values, traceback frames, refused arguments, noisy prefixes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.logfacts import derive, parse_text
from launcher.logfacts.capture import CaptureTracker
from launcher.logfacts.failure import Cause, FailureKind, argument_of, frame_phase
from launcher.logfacts.lines import parse_segment, strip_outer, unglue
from launcher.logfacts.startup import ASKED, STATED, Startup


def _tracker(kv_sized: bool = False) -> CaptureTracker:
    cap = CaptureTracker(kv_sized=kv_sized)
    cap.on_bar("Capturing CUDA graphs (PIECEWISE)", 51, 51, None)
    cap.on_done(2.0, 0.11, "Graph capturing finished in 2 secs, took 0.11 GiB")
    return cap


@pytest.mark.parametrize(
    ("none_expected", "failed", "done", "want"),
    [
        (False, False, True, True),  # the final capture finished
        (True, False, False, False),  # eager / mode NONE / skipped: nothing to capture
        (False, True, False, False),  # startup failed before the capture finished
        (False, False, False, None),  # the log was cut: a capture may still come
    ],
)
def test_captured_or_not(none_expected: bool, failed: bool, done: bool, want: bool | None) -> None:
    cap = _tracker(kv_sized=True) if done else CaptureTracker(kv_sized=True)
    assert derive.graphs(cap, none_expected, failed).captured is want


def test_no_graphs_when_eager_mode_none_or_skipped() -> None:
    assert derive.no_graphs(True, None, False) and derive.no_graphs(None, "NONE", False)
    assert derive.no_graphs(None, None, True) and not derive.no_graphs(False, "PIECEWISE", False)
    counts = derive.graphs(CaptureTracker(), True, False)
    assert (counts.count, counts.expected, counts.by_mode) == (0, 0, {})


def test_an_excerpt_without_kv_line_shows_the_final_capture() -> None:
    cap = _tracker()
    assert cap.final_done is None and cap.profiling_graphs() == 51
    settled = cap.settled(excerpt=True)
    assert (
        settled.final_done == (2.0, 0.11) and settled.captured() == 51 and settled.profiling_graphs() is None
    )
    assert cap.settled(excerpt=False) is cap  # a complete log: V2's profiling pass stays one
    cap.mode_counts = {"PIECEWISE": 51}
    assert cap.settled(excerpt=True) is cap  # V1 printed its profile: that was profiling


def test_the_kv_pool_is_the_smallest_rank() -> None:
    kv = derive.kv_fields([100, 90], [(2.0, 4096), (1.5, 4096)], [3.0, 2.5], [])
    assert (kv["kv_cache_tokens"], kv["kv_cache_gib"], kv["max_concurrency"].value) == (90, 2.5, 1.5)
    assert kv["kv_cache_tokens_per_rank"] == [100, 90] and kv["gpu_blocks"] is None


def test_failure_fields_name_the_refused_argument_only_for_argument_kinds() -> None:
    read = derive.FailureRead(
        Cause(FailureKind.ARGUMENT, 3),
        "l",
        1,
        "vllm serve: error: argument --dtype: invalid choice",
        None,
        None,
    )
    assert derive.failure_fields(read)["failure_argument"] == "--dtype"
    other = derive.FailureRead(
        Cause(FailureKind.OOM, 3), "l", 1, "x: error: argument --y: z", None, "capture"
    )
    assert derive.failure_fields(other)["failure_argument"] is None
    assert derive.failure_fields(None)["failure_kind"] is None


@pytest.mark.parametrize(
    ("message", "argument"),
    [
        (
            "vllm serve: error: argument -tp/--tensor-parallel-size: invalid int value: 'two'",
            "-tp/--tensor-parallel-size",
        ),
        ("vllm serve: error: argument --port: expected one argument", "--port"),
        ("vllm: error: unrecognized arguments: --omni --x 1", "--omni --x 1"),
        ("vllm serve: error: the following arguments are required: model_tag", "model_tag"),
        (
            "ValueError: With `vllm serve`, you should provide the model as a positional argument or in a "
            "config file instead of via the `--model` option.",
            "--model",
        ),
        (
            "ValueError: No model specified! Please specify model either as a positional argument or in a "
            "config file.",
            "model_tag",
        ),
        ("vllm serve: error: something else", None),
    ],
)
def test_argument_of(message: str, argument: str | None) -> None:
    assert argument_of(message) == argument


@pytest.mark.parametrize(
    ("msg", "phase"),
    [
        ('  File "/x/vllm/v1/worker/gpu_model_runner.py", line 5684, in capture_model', "capture"),
        ("    kv_cache_config = self._initialize_kv_caches(vllm_config)", "profiling"),
        ('  File "/x/vllm/v1/worker/gpu_worker.py", line 424, in load_model', "loading"),
        ("    cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory()", "profiling"),
        ('  File "/x/vllm/v1/engine/core.py", line 136, in __init__', None),
        ("Capture the model for a start of capture_model later", None),  # not a frame
    ],
)
def test_frame_phase(msg: str, phase: str | None) -> None:
    assert frame_phase(msg) == phase


def test_a_stated_line_replaces_an_inferred_value_and_its_line() -> None:
    s = Startup(())
    s.infer("enforce_eager", False, "Capturing cudagraphs for decoding.", 7)
    s.infer("enforce_eager", False, "a later bar", 9)
    assert s.inferred["enforce_eager"] == ("Capturing cudagraphs for decoding.", 7)
    s.set("enforce_eager", False, STATED)
    assert "enforce_eager" not in s.inferred
    s.infer("enforce_eager", True, "never", 10)  # an inference never overrides a stated value
    assert s.values["enforce_eager"] is False
    s.set("model_runner", "v1", ASKED)
    s.infer("model_runner", "v2", "no", 11)
    assert s.values["model_runner"] == "v1" and "model_runner" not in s.inferred


def test_inferred_facts_carry_their_line_in_the_json() -> None:
    facts, _ = parse_text(
        "INFO 08-19 07:51:08 distributed_gpu_executor.py:56] # GPU blocks: 22982, # CPU blocks: 6241\n"
        "(VllmWorkerProcess pid=13109) INFO 08-19 07:51:12 model_runner.py:1024] Capturing the model for "
        "CUDA graphs. This may lead to unexpected consequences if the model is not static.\n"
    )
    payload = facts.to_json()
    assert payload["enforce_eager"] is False
    assert payload["inferred"]["enforce_eager"]["line_no"] == 2
    assert "Capturing the model for CUDA graphs" in payload["inferred"]["enforce_eager"]["line"]
    stated, _ = parse_text(
        "INFO 01-01 00:00:00 llm_engine.py:70] Initializing an LLM engine with config: "
        "model='m', enforce_eager=False, seed=0)\n"
    )
    assert stated.enforce_eager is False and stated.inferred == {}


def test_a_logged_startup_traceback_is_a_failure_with_its_phase() -> None:
    text = (
        '(EngineCore_DP0 pid=387) ERROR 03-08 16:44:32 [core.py:1111]   File "/v/vllm/v1/worker/'
        'gpu_model_runner.py", line 5684, in capture_model\n'
        "(EngineCore_DP0 pid=387) ERROR 03-08 16:44:32 [core.py:1111]     self._capture_cudagraphs(\n"
    )
    facts, _ = parse_text(text)
    assert (facts.outcome, facts.failure_kind, facts.failure_phase) == ("failed", "engine_init", "capture")
    assert facts.inferred["failure_phase"].line_no == 1 and facts.enforce_eager is False
    request_error = text.replace("[core.py:1111]", "[serving_chat.py:1278]")
    assert parse_text(request_error)[0].outcome is None  # a request's error is not a failed start


@pytest.mark.parametrize(
    ("line", "level", "msg"),
    [
        ("O 04-11 12:37:49 [llm_engine.py:242] Initializing", "INFO", "Initializing"),
        (
            "ROR 04-11 12:37:49 [core.py:1] EngineCore failed to start.",
            "ERROR",
            "EngineCore failed to start.",
        ),
        ("G 04-11 12:37:49 [x.py:1] m", "?", "m"),  # DEBUG or WARNING: unknown, never an error
    ],
)
def test_a_cut_level_keeps_the_rest_of_vllms_prefix(line: str, level: str, msg: str) -> None:
    rec = parse_segment(line)
    assert (rec.level, rec.msg) == (level, msg)


@pytest.mark.parametrize(
    "prefix",
    [
        "2025-11-12 20:41:49,503 - INFO - ",
        "авг 18 14:15:04 llm python3[28059]: ",
        "[rank0]: ",
        "> ",
        "> [2026-01-28T23:59:42Z] ",
    ],
)
def test_outer_prefixes_of_wrappers_and_pastes(prefix: str) -> None:
    line = "(EngineCore pid=1) INFO 08-18 14:15:04 [vllm.py:1721] Cudagraph is disabled under eager mode"
    assert strip_outer(prefix + line) == line


def test_a_paste_that_lost_its_newlines_is_read_record_by_record() -> None:
    glued = (
        "(APIServer pid=9)     raise _format(RepositoryNotFoundError, message, response) from e"
        "(APIServer pid=9) huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error."
        "(APIServer pid=9) Invalid username."
    )
    assert unglue(glued)[1].startswith("(APIServer pid=9) huggingface_hub.errors")
    facts, _ = parse_text(glued + "\n")
    assert (facts.outcome, facts.failure_kind, facts.failure_proc) == (
        "failed",
        "model_not_found",
        "APIServer",
    )
    spaced = "x ERROR 11-04 18:02:56 [a.py:1] y ERROR 11-04 18:02:56 [a.py:1] RuntimeError: NCCL error: z"
    assert [p[:5] for p in unglue(spaced)] == ["x", "ERROR", "ERROR"]
    normal = "(APIServer pid=3) WARNING 12-01 07:17:05 [core_client.py:702] [shutdown] MPClient: exited"
    assert unglue(normal) == [normal]  # a level right after its process tag is the same record


def test_an_echoed_command_continued_with_backslashes() -> None:
    facts, _ = parse_text(
        "python -m vllm.entrypoints.openai.api_server \\\n     --model m/x \\\n     --port 8087 \\\n"
        "     -tp 2\nINFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.7.0\n"
    )
    assert (facts.model, facts.served_port, facts.tensor_parallel_size) == ("m/x", 8087, 2)
    assert facts.vllm_version == "0.7.0"


def test_a_failure_after_an_excerpts_capture_is_in_the_capture_phase() -> None:
    facts, _ = parse_text(
        "(VllmWorker rank=0 pid=1) INFO 05-15 17:46:31 [gpu_model_runner.py:1626] Graph capturing finished "
        "in 78 secs, took 2.28 GiB\n"
        "(VllmWorker rank=1 pid=2) ERROR 05-15 17:46:32 [multiproc_executor.py:380] WorkerProc hit an "
        "exception\n"
    )
    assert (facts.cudagraph_captured, facts.failure_phase) == (True, "capture")
    warmup = (
        '(Worker_TP2 pid=9) ERROR 04-09 20:31:10 [multiproc_executor.py:949]   File "/v/vllm/v1/worker/'
        'gpu_worker.py", line 588, in compile_or_warm_up_model\n'
    )
    facts, _ = parse_text(warmup)
    assert facts.failure_phase == "capture" and facts.enforce_eager is None  # eager mode warms up too


REAL_TINY = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "tiny.log"


def test_a_startup_across_new_year_takes_its_real_seconds() -> None:
    """vLLM stamps `MM-DD HH:MM:SS` without a year: the recorded 0.26.0 start (banner 09:31:20,
    server 09:32:24: 64 s) moved to New Year's Eve must still take 64 s, not a negative day."""
    text = REAL_TINY.read_text(encoding="utf-8")
    assert parse_text(text)[0].startup_seconds == 64.0
    moved = text.replace("11-29 09:31:", "12-31 23:59:").replace("11-29 09:32:", "01-01 00:00:")
    assert parse_text(moved)[0].startup_seconds == 64.0


# ---- the capture tracker: which bars and which finish line count ------------------------------------------


PIECEWISE, FULL = "Capturing CUDA graphs (PIECEWISE)", "Capturing CUDA graphs (FULL)"


def test_bars_before_the_kv_line_are_the_profiling_pass_and_a_redraw_changes_nothing() -> None:
    cap = CaptureTracker()
    assert cap.on_bar(PIECEWISE, 10, 51, None) == "profiling"
    assert cap.on_bar(PIECEWISE, 10, 51, None) is None  # the same redraw again
    assert cap.on_bar(PIECEWISE, 51, 51, None) == "profiling"
    assert cap.profiling_graphs() == 51 and cap.captured() is None and cap.final_bars == {}


def test_after_the_kv_line_only_the_first_rank_seen_is_counted() -> None:
    cap = CaptureTracker(kv_sized=True)
    assert cap.on_bar(PIECEWISE, 51, 51, "VllmWorker rank=0") == "final"
    assert cap.on_bar(PIECEWISE, 51, 51, "VllmWorker rank=1") is None  # its copy of the same bars
    assert cap.on_bar(FULL, 26, 51, "VllmWorker rank=1") is None
    assert cap.on_bar(FULL, 26, 51, "VllmWorker rank=0") == "final"
    assert cap.captured() == 77 and cap.expected() == 102


def test_nothing_counts_once_the_engine_is_initialized() -> None:
    cap = CaptureTracker(kv_sized=True, engine_initialized=True)
    assert cap.on_bar(PIECEWISE, 51, 51, None) is None
    assert not cap.on_done(1.0, 0.1, "Graph capturing finished in 1 secs") and cap.final_done is None


def test_only_the_first_finish_line_after_the_kv_line_is_the_final_captures() -> None:
    cap = CaptureTracker()
    assert not cap.on_done(3.0, 0.5, "profiling pass")
    assert not cap.on_done(4.0, 0.6, "a second profiling line")
    assert cap.profiling_done == (3.0, 0.5, "profiling pass")  # the first one is kept
    cap.kv_sized = True
    assert cap.on_done(2.0, 0.11, "final")
    assert not cap.on_done(9.0, 9.9, "later")
    assert (cap.final_done, cap.done_line) == ((2.0, 0.11), "final")


def test_graphs_per_mode_come_from_v1_and_v2_bar_labels_summed_per_mode() -> None:
    cap = CaptureTracker(kv_sized=True)
    cap.on_bar("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 35, 35, None)
    cap.on_bar("Capturing CUDA graphs (decode, FULL)", 19, 19, None)
    cap.on_bar(PIECEWISE, 2, 2, None)
    assert cap.captured_by_mode() == {"PIECEWISE": 37, "FULL": 19}


def test_unlabelled_bars_leave_the_modes_to_v1s_printed_profile_once_the_capture_finished() -> None:
    cap = CaptureTracker(kv_sized=True, mode_counts={"PIECEWISE": 51, "FULL": 51})
    cap.on_bar("Capturing CUDA graph shapes", 67, 67, None)  # V0's bar names no mode
    assert cap.captured_by_mode() is None
    cap.on_done(5.0, None, "Graph capturing finished in 5 secs")
    assert cap.captured_by_mode() == {"PIECEWISE": 51, "FULL": 51}
    assert cap.expected() == 102 and cap.captured() == 67  # bars, when there are some, are the count


def test_a_finished_capture_without_bars_counts_the_printed_profile() -> None:
    cap = CaptureTracker(kv_sized=True, mode_counts={"PIECEWISE": 2, "FULL": 2})
    assert cap.captured() is None  # not finished yet: nothing proven
    cap.on_done(1.0, 0.04, "done")
    assert cap.captured() == 4


def test_settling_an_excerpt_with_only_a_finish_line_makes_it_the_final_one() -> None:
    cap = CaptureTracker()
    cap.on_done(7.0, 1.2, "Graph capturing finished in 7 secs, took 1.2 GiB")
    settled = cap.settled(excerpt=True)
    assert (settled.final_done, settled.done_line, settled.final_bars) == (
        (7.0, 1.2),
        "Graph capturing finished in 7 secs, took 1.2 GiB",
        {},
    )
    assert settled.profiling_done is None and cap.profiling_done is not None  # the original is untouched
    assert CaptureTracker().settled(excerpt=True).final_done is None  # nothing seen: nothing to settle


# 0.26.0, V2 runner: line 41 is the KV size, line 42 the concurrency printed with it (either one says
# the KV cache is sized, so the capture after them is the final one)
TINY_LINES = REAL_TINY.read_bytes().decode("utf-8").split("\n")


def test_a_real_capture_seen_after_the_kv_line_is_final_and_counts_both_modes() -> None:
    assert "GPU KV cache size" in TINY_LINES[40] and "Maximum concurrency" in TINY_LINES[41]
    facts = parse_text("\n".join(TINY_LINES))[0]
    assert (facts.graphs_captured, facts.graphs_expected) == (102, 102)
    assert facts.graphs_captured_by_mode == {"PIECEWISE": 51, "FULL": 51} and facts.profiling_graphs is None


def test_the_same_capture_without_its_kv_lines_is_profiling_in_a_whole_log_and_final_in_an_excerpt() -> None:
    whole = parse_text("\n".join(TINY_LINES[:40] + TINY_LINES[42:]))[0]
    assert whole.profiling_graphs == 102 and whole.graphs_captured is None and whole.capture_seconds is None
    excerpt = parse_text("\n".join(TINY_LINES[42:]))[0]  # began after the banner and the KV lines
    assert (
        excerpt.graphs_captured == 102 and excerpt.capture_seconds == 1.0 and excerpt.profiling_graphs is None
    )


def test_graphs_of_an_eager_start_are_zero_not_unknown() -> None:
    g = derive.graphs(CaptureTracker(), none_expected=True, failed=False)
    assert (g.captured, g.count, g.expected, g.by_mode) == (False, 0, 0, {})
    unknown = derive.graphs(CaptureTracker(), none_expected=False, failed=False)
    assert (unknown.captured, unknown.count, unknown.expected, unknown.by_mode) == (None, None, None, None)


def test_kv_fields_of_no_kv_line_are_all_unknown() -> None:
    kv = derive.kv_fields([], [], [], [])
    assert all(value is None for value in kv.values())
    blocks = derive.kv_fields([], [], [], [22982, 22900])
    assert blocks["gpu_blocks"] == 22900 and blocks["kv_cache_tokens"] is None


def test_the_smallest_concurrency_comes_with_its_own_max_model_len() -> None:
    kv = derive.kv_fields([], [(4.5, 32768), (3.9, 16384)], [], [])
    assert (kv["max_concurrency"].value, kv["max_concurrency"].max_model_len) == (3.9, 16384)
    assert kv["max_concurrency_per_rank"] == [4.5, 3.9]
