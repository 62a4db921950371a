"""Why a startup died: the failure lines of vllm-facts.md §5, ranked so the most specific cause wins.

The root cause is often only in the last line of a traceback, and the generic `Engine core
initialization failed` comes after it (from the API server); ranking keeps the specific cause
whatever the order. A cause counts only on lines that are errors: ERROR/CRITICAL records,
uvicorn `ERROR:`, or unprefixed stderr (uncaught tracebacks); never on the INFO memory summary
that also starts with `Free memory on device`, and never on traceback source lines (indented).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from launcher.logfacts.lines import EXCEPTION_LINE, Record


class FailureKind(StrEnum):
    FREE_MEMORY = "free_memory"
    KV_CACHE_TOO_SMALL = "kv_cache_too_small"
    OOM = "oom"
    ENGINE_INIT = "engine_init"
    TOOL_PARSER = "tool_parser"
    REASONING_PARSER = "reasoning_parser"
    PORT_IN_USE = "port_in_use"
    DISTRIBUTED = "distributed"
    MODEL_NOT_FOUND = "model_not_found"
    GPU_CAPABILITY = "gpu_capability"
    CHAT_TEMPLATE = "chat_template"
    CONFIG = "config"
    ARGUMENT = "argument"  # the argument parser refused the command line (argparse, or vLLM's own check)
    COMPILE = "compile"  # torch.compile (dynamo / inductor) failed
    CUDA_GRAPH = "cuda_graph"  # CUDA-graph capture itself failed (not memory: that is `oom`)
    OTHER = "other"


# Kinds whose failure line names the argument it refused (`failure_argument`).
ARGUMENT_KINDS = frozenset({FailureKind.ARGUMENT, FailureKind.TOOL_PARSER, FailureKind.REASONING_PARSER})


SPECIFIC = 3  # a named cause
ENGINE = 2  # the engine failed, cause not named on this line
EXPLICIT = 1  # a known fatal line with no dedicated kind, or an uncaught exception after a traceback
EXIT = 0  # only the process exit (systemd / docker) tells us


@dataclass(frozen=True, slots=True)
class Cause:
    kind: FailureKind
    rank: int


_RULES: tuple[tuple[re.Pattern[str], Cause], ...] = (
    # Every phrasing below has catalogue rows (launcher/logfacts/catalogue.json: releases, file:line).
    # v1/worker/gpu_worker.py (0.9.1+), `cuda:N` form v1/worker/utils.py (0.33)
    # `Error in memory profiling` (V0 worker.py, V1 gpu_worker.py, 0.6+): memory changed under vLLM
    # while it profiled, i.e. another process on the GPU
    (
        re.compile(r"Free memory on device.*? on startup is less than|Error in memory profiling\. "),
        Cause(FailureKind.FREE_MEMORY, SPECIFIC),
    ),
    # V0 worker.py / V1 kv_cache_utils.py `No available memory for the cache blocks` (0.6+); V1 `To serve
    # at least one request with the model's max seq len` (0.8.x spelled `models's`) with its `... GiB KV
    # cache is needed, which is larger than the available KV cache memory`; V0 `The model's max seq len
    # (N) is larger than the maximum number of tokens that can be stored in KV cache (M)`
    (
        re.compile(
            r"No available memory for the cache blocks"
            r"|To serve at least one request with the models?'s max"
            r"|max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV"
            r"|is larger than the available KV cache memory"
        ),
        Cause(FailureKind.KV_CACHE_TOO_SMALL, SPECIFIC),
    ),
    # torch; V1 runner wrapper gpu_model_runner.py (0.13+)
    (
        re.compile(
            r"CUDA out of memory|OutOfMemoryError|Failed to load model - not enough GPU memory"
            r"|CUDA error: out of memory"
        ),
        Cause(FailureKind.OOM, SPECIFIC),
    ),
    # entrypoints/openai/api_server.py KeyError (0.6.3+), cli_args.py, parser_manager.py (vllm-facts.md §5),
    # argparse when `--tool-call-parser` had choices
    (
        re.compile(
            r"invalid tool call parser"
            r"|--enable-auto-tool-choice requires (?:--tool-call-parser|tool_parser)"
            r"|cannot be used with the tokenizer|tool_parser:'[^']*' which has not been registered"
            r"|argument --tool-call-parser: invalid choice|Tool parser '[^']*' not found"
        ),
        Cause(FailureKind.TOOL_PARSER, SPECIFIC),
    ),
    # api_server.py KeyError (0.7.2+), argparse choices (0.7.2-0.10), parser_manager.py TypeError (0.26),
    # abs_reasoning_parsers.py KeyError `Reasoning parser 'x' not found.` (0.13+, recorded on 0.26.0)
    (
        re.compile(
            r"invalid reasoning parser|argument --reasoning-parser: invalid choice"
            r"|Reasoning parser '[^']*' not found"
            r"|--enable-reasoning requires --reasoning-parser"
            r"|reasoning_parser_name='[^']*' has not been"
        ),
        Cause(FailureKind.REASONING_PARSER, SPECIFIC),
    ),
    # pynccl_wrapper.py `NCCL error: ...` (0.6+); torch.distributed's rendezvous and backend errors
    # (before the port rule: torch's rendezvous port in use is not the API server's port)
    (
        re.compile(r"NCCL error|DistNetworkError|DistBackendError|DistStoreError"),
        Cause(FailureKind.DISTRIBUTED, SPECIFIC),
    ),
    # entrypoints/launchers/launcher.py create_server_socket; uvicorn's own bind error in older releases
    (re.compile(r"Errno 98|[Aa]ddress already in use"), Cause(FailureKind.PORT_IN_USE, SPECIFIC)),
    # transformers_utils/config.py, default_loader.py; huggingface_hub's errors for a missing, gated or
    # offline model
    (
        re.compile(
            r"Invalid repository ID or local directory specified|Cannot find any model weights with"
            r"|Repository Not Found for url|RepositoryNotFoundError|Cannot access gated repo"
            r"|GatedRepoError|OfflineModeIsEnabled|LocalEntryNotFoundError"
            r"|is not a local folder and is not a valid model"
            r"|We couldn't connect to 'https://huggingface\.co'|HTTPSConnectionPool\(host='huggingface\.co'"
            r"|access a gated repo|HFValidationError"
        ),
        Cause(FailureKind.MODEL_NOT_FOUND, SPECIFIC),
    ),
    # worker.py / platforms/cuda.py (bf16 on a V100), config/vllm.py quantization minimum capability;
    # CUDA's own `no kernel image` for a kernel not built for this GPU
    (
        re.compile(
            r"Bfloat16 is only supported on GPUs with compute capability"
            r"|is not supported for the current GPU\. Minimum capability"
            r"|no kernel image is available for execution on the device"
            r"|FlashAttention only supports Ampere GPUs or newer"
        ),
        Cause(FailureKind.GPU_CAPABILITY, SPECIFIC),
    ),
    # entrypoints/chat_utils.py; tokenizers/hf.py (transformers_utils/tokenizer.py before 0.11)
    (
        re.compile(
            r"looks like a file path, but it failed to be opened|Failed to load the tokenizer"
            r"|TemplateSyntaxError"
        ),
        Cause(FailureKind.CHAT_TEMPLATE, SPECIFIC),
    ),
    # v1/engine/utils.py, core.py, multiproc_executor.py (vllm-facts.md §5.1)
    (
        re.compile(
            r"^(?:RuntimeError: )?Engine core initialization failed|^EngineCore(?:_\w+)? failed to start"
            r"|^WorkerProc failed to start|WorkerProc initialization failed|^WorkerProc hit an exception"
            r"|Frontend process failed during engine core initialization"
            r"|Engine process failed to start"
        ),  # V0 MQLLMEngine, 0.6.2-0.10.2
        Cause(FailureKind.ENGINE_INIT, ENGINE),
    ),
    # vLLM's config validation (pydantic): `ValidationError: 1 validation error for ModelConfig`, then
    # the reason on `  Value error, ...`, e.g. the max_model_len check of config/model.py (vllm-facts.md §5)
    # (older releases raise these as plain ValueErrors: model.py / config.py checks)
    (
        re.compile(
            r"^\s{0,2}Value error, |User-specified max_model_len \(\d+\) is greater than"
            r"|must be divisible by tensor parallel size"
            r"|max_num_batched_tokens \(\d+\) is\s+smaller than"
        ),
        Cause(FailureKind.CONFIG, SPECIFIC),
    ),
    # torch.compile's own exceptions (torch/_dynamo/exc.py, torch/_inductor/exc.py), raised in a worker
    # while vLLM compiles the model (the profiling run)
    (
        re.compile(r"BackendCompilerFailed|InductorError|torch\._dynamo\.exc\.|torch\._inductor\.exc\."),
        Cause(FailureKind.COMPILE, SPECIFIC),
    ),
    # CUDA's refusal of an operation inside graph capture (cudaErrorStreamCaptureUnsupported/Invalidated)
    (
        re.compile(r"operation not permitted when stream is capturing|cudaErrorStreamCapture"),
        Cause(FailureKind.CUDA_GRAPH, SPECIFIC),
    ),
    # argparse: `vllm serve: error: argument --dtype: invalid choice: …`, `vllm: error: unrecognized
    # arguments: …`, `api_server.py: error: …` (the program name, one or two words); vLLM's own
    # FlexibleArgumentParser refusals (utils/argparse_utils.py, utils.py before 0.10)
    (
        re.compile(
            r"^[\w.-]+(?: [\w.-]+)?: error: "
            r"|you should provide the model as a positional argument or in a config file instead of via"
            r"|No model specified! Please specify model either as a positional argument"
        ),
        Cause(FailureKind.ARGUMENT, SPECIFIC),
    ),
    # core_client.py ready timeout
    (re.compile(r"Timed out waiting for engine core processes to start"), Cause(FailureKind.OTHER, EXPLICIT)),
)
# Where a failure line can be, for the prefilter and for skimming superseded startups: the rules'
# texts unanchored, with the argparse rule cut to its literal (a leading class would test every byte).
SCAN = re.compile(
    "|".join(
        rx.pattern.replace("^(?:RuntimeError: )?", "").replace("^\\s{0,2}", "").replace("^", "")
        for rx, _ in _RULES
        if rx.pattern != _RULES[-2][0].pattern
    )
    + "|: error: |you should provide the model as a positional|No model specified! Please specify"
)
_UNCAUGHT = Cause(FailureKind.OTHER, EXPLICIT)
_ERROR_LEVELS = (None, "ERROR", "CRITICAL")

# systemd: `vllm.service: Main process exited, code=exited, status=1/FAILURE`; docker compose:
# `vllm-1 exited with code 137`.
_SYSTEMD_EXIT = re.compile(r"\.service: Main process exited, code=(?P<code>\w+), status=(?P<status>[^/\s]+)")
_DOCKER_EXIT = re.compile(r"\bexited with code (?P<status>\d+)")


def classify(rec: Record, after_traceback: bool) -> Cause | None:
    """The failure this record proves, or None. `after_traceback`: a traceback header came earlier."""
    if rec.level not in _ERROR_LEVELS or rec.msg.startswith("   "):
        return None
    msg = rec.msg
    for rx, cause in _RULES:
        if rx.search(msg):
            return cause
    if after_traceback and EXCEPTION_LINE.match(msg) and not msg.startswith("Traceback"):
        return _UNCAUGHT
    return None


def process_exit(msg: str) -> int | None:
    """The exit status when the line says vLLM's process ended (0 = clean), else None."""
    m = _SYSTEMD_EXIT.search(msg)
    if m is not None:
        status = m.group("status")
        return 0 if status in ("0", "SUCCESS") else (int(status) if status.isdigit() else 1)
    m = _DOCKER_EXIT.search(msg)
    return int(m.group("status")) if m is not None else None


# argparse names what it refused: `argument --dtype: invalid choice: …`, `argument -tp/--tensor-parallel-size:
# invalid int value: …`, `unrecognized arguments: --omni`, `the following arguments are required: model_tag`;
# vLLM's own check names the option in backquotes (`via the `--model` option`).
_ARGUMENT = re.compile(
    r": error: (?:argument (?P<flag>[^:]+?): |unrecognized arguments: (?P<extra>.+?)\s*$"
    r"|the following arguments are required: (?P<required>.+?)\s*$)"
    r"|via the `(?P<option>-[\w-]+)` option|(?P<positional>No model specified)"
)


def argument_of(message: str) -> str | None:
    """The argument a refused command line names, as the refusal spells it; None when it names none."""
    m = _ARGUMENT.search(message)
    if m is None:
        return None
    if m.group("positional"):
        return "model_tag"
    return next(g for g in m.group("flag", "extra", "required", "option") if g)


# How far startup had got, from the frames of a traceback: vLLM's own method names, stable across
# releases (0.26.0: v1/engine/core.py _initialize_kv_caches, v1/worker/gpu_worker.py load_model /
# determine_available_memory / compile_or_warm_up_model, v1/worker/gpu_model_runner.py profile_run /
# profile_cudagraph_memory / capture_model; V0 worker/worker.py determine_num_available_blocks /
# _warm_up_model). The innermost frame that maps wins: _initialize_kv_caches runs both profiling and
# capture, and V1's profile_cudagraph_memory captures graphs to measure them (still profiling).
_FRAME_PHASES = {
    "load_model": "loading",
    "load_weights": "loading",
    "_initialize_kv_caches": "profiling",
    "determine_available_memory": "profiling",
    "determine_num_available_blocks": "profiling",
    "profile_run": "profiling",
    "profile_cudagraph_memory": "profiling",
    "compile_or_warm_up_model": "capture",
    "_warm_up_model": "capture",
    "capture_model": "capture",
    "capture_end": "capture",  # torch/cuda/graphs.py: the end of one graph's capture
}
# Frames that exist only when graphs are captured (the warm-up frames also run in eager mode).
CAPTURE_FRAMES = frozenset({"capture_model", "capture_end"})
_FRAME = re.compile(r"(?:, in |\.)(?P<func>" + "|".join(_FRAME_PHASES) + r")(?:\(|\s*$)")
# The loggers that print a startup failure's traceback at ERROR (`logger.exception`): the engine core,
# the executors and workers, V0's engine (vllm-facts.md §5.1); a request's error is logged elsewhere.
_STARTUP_LOGGERS = frozenset(
    {"core.py", "multiproc_executor.py", "engine.py", "worker_base.py", "multiproc_worker_utils.py"}
)


def frame_of(msg: str) -> str | None:
    """The vLLM (or torch) function a traceback frame is in: `File …, in capture_model`,
    `    self.model_runner.capture_model()`; None for any other line, or a function we do not map."""
    if "File " not in msg and not msg.startswith(" "):
        return None
    m = _FRAME.search(msg)
    return m.group("func") if m else None


def frame_phase(msg: str) -> str | None:
    """The startup phase a traceback frame is in (loading / profiling / capture)."""
    func = frame_of(msg)
    return _FRAME_PHASES[func] if func else None


def is_logged_startup_traceback(rec: Record) -> bool:
    """An ERROR line of a traceback that one of vLLM's startup loggers printed: the engine failed to start,
    even where the excerpt holds neither the traceback's header nor its exception line."""
    if rec.level not in ("ERROR", "CRITICAL") or rec.src is None:
        return False
    if rec.src.rsplit("/", 1)[-1] not in _STARTUP_LOGGERS:
        return False
    return rec.msg.startswith(("Traceback (most recent call last)", '  File "', "    "))
