"""Why a startup died: the failure lines of FACTS §5, ranked so the most specific cause wins.

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
    PORT_IN_USE = "port_in_use"
    CONFIG = "config"
    OTHER = "other"


SPECIFIC = 3  # a named cause
ENGINE = 2  # the engine failed, cause not named on this line
EXPLICIT = 1  # a known fatal line with no dedicated kind, or an uncaught exception after a traceback
EXIT = 0  # only the process exit (systemd / docker) tells us


@dataclass(frozen=True, slots=True)
class Cause:
    kind: FailureKind
    rank: int


_RULES: tuple[tuple[re.Pattern[str], Cause], ...] = (
    # v1/worker/utils.py:762 request_memory; older `Free memory on device (3.22/4.0 GiB) on startup is less…`
    (re.compile(r"Free memory on device.*? on startup is less than"),
     Cause(FailureKind.FREE_MEMORY, SPECIFIC)),
    # v1/core/kv_cache_planning.py:57 and :77; older V0 `The model's max seq len (N) is larger than the
    # maximum number of tokens that can be stored in KV cache (M)`
    (re.compile(r"No available memory for the cache blocks|To serve at least one request with the model's max"
                r"|max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV"),
     Cause(FailureKind.KV_CACHE_TOO_SMALL, SPECIFIC)),
    # torch; V1 runner wrapper gpu_model_runner.py:5086
    (re.compile(r"CUDA out of memory|OutOfMemoryError|Failed to load model - not enough GPU memory"
                r"|CUDA error: out of memory"), Cause(FailureKind.OOM, SPECIFIC)),
    # entrypoints/common/cli_args.py, parser/parser_manager.py (FACTS §5 "Tool and reasoning parser")
    (re.compile(r"invalid tool call parser"
                r"|--enable-auto-tool-choice requires (?:--tool-call-parser|tool_parser)"
                r"|cannot be used with the tokenizer|tool_parser:'[^']*' which has not been registered"),
     Cause(FailureKind.TOOL_PARSER, SPECIFIC)),
    # entrypoints/launchers/launcher.py create_server_socket; uvicorn's own bind error in older releases
    (re.compile(r"Errno 98|[Aa]ddress already in use"), Cause(FailureKind.PORT_IN_USE, SPECIFIC)),
    # v1/engine/utils.py:1473, core.py:1584, multiproc_executor.py:1057 (FACTS §5 "How startup failures
    # surface")
    (re.compile(r"^(?:RuntimeError: )?Engine core initialization failed|^EngineCore(?:_\w+)? failed to start"
                r"|^WorkerProc failed to start|WorkerProc initialization failed|^WorkerProc hit an exception"
                r"|Frontend process failed during engine core initialization"),
     Cause(FailureKind.ENGINE_INIT, ENGINE)),
    # vLLM's config validation (pydantic): `ValidationError: 1 validation error for ModelConfig`, then
    # the reason on `  Value error, ...`, e.g. the max_model_len check of config/model.py (FACTS §5)
    (re.compile(r"^\s{0,2}Value error, |User-specified max_model_len \(\d+\) is greater than"),
     Cause(FailureKind.CONFIG, SPECIFIC)),
    # core_client.py:764 ready timeout; argparse
    (re.compile(r"Timed out waiting for engine core processes to start|^vllm: error:"),
     Cause(FailureKind.OTHER, EXPLICIT)),
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
