"""Turn a catalogue row's example message into log lines as a given vLLM release prints them.

Formats come from vLLM's logger per release (vllm/logger.py `_FORMAT`): up to 0.7.x
`LEVEL MM-DD HH:MM:SS file.py:N] msg`; from 0.8.0 `[file.py:N]`; process prefixes from
`_add_prefix`: `(VllmWorkerProcess pid=N)` (V0 workers), `(VllmWorker rank=N pid=N)` (V1, 0.8-0.10),
`(APIServer pid=N)`, `(EngineCore_DP0 pid=N)`, `(Worker_TP1 pid=N)` (0.11+).
"""

from __future__ import annotations

import html
from collections.abc import Callable

TS = "11-29 06:26:09"


def release_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


def worker_proc(release: str) -> str:
    key = release_key(release)
    if key < (0, 8, 0):
        return "VllmWorkerProcess"
    return "VllmWorker rank=1" if key < (0, 11, 0) else "Worker_TP1"


def record(release: str, level: str, src: str, msg: str, proc: str | None = None, pid: int = 4411) -> str:
    where = f"{src}]" if release_key(release) < (0, 8, 0) else f"[{src}]"
    head = f"({proc} pid={pid}) " if proc else ""
    return f"{head}{level} {TS} {where} {msg}"


def banner(release: str) -> list[str]:
    api = "APIServer" if release_key(release) >= (0, 11, 0) else None
    return [record(release, "INFO", "api_server.py:1", f"vLLM API server version {release}", api, 4101)]


def traceback_lines() -> list[str]:
    return [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/main.py", line 75, in main',
        "    args.dispatch_function(args)",
    ]


def raised_unprefixed(release: str, exc: str, message: str) -> list[str]:
    """An uncaught exception in the main process (V0 engine, API server): plain stderr."""
    return [*banner(release), *traceback_lines(), f"{exc}: {message}"]


def raised_in_worker(release: str, exc: str, message: str) -> list[str]:
    """A worker's exception logged by vLLM (every line prefixed), then the generic engine lines."""
    proc = worker_proc(release)
    src = "multiproc_executor.py:531"
    body = [*traceback_lines(), f"{exc}: {message}"]
    lines = [*banner(release), record(release, "ERROR", src, "WorkerProc failed to start.", proc)]
    for part in body:
        lines += [record(release, "ERROR", src, sub, proc) for sub in part.split("\n")]
    if release_key(release) >= (0, 8, 4):
        lines += [*traceback_lines(),
                  "RuntimeError: Engine core initialization failed. See root cause above. "
                  "Failed core proc(s): {}"]
    return lines


def argparse_error(release: str, message: str) -> list[str]:
    return ["usage: vllm serve [model_tag] [options]", f"vllm: error: {message}"]


def pydantic_error(release: str, message: str) -> list[str]:
    return [*banner(release), *traceback_lines(),
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
            f"  Value error, {message} [type=value_error, input_value=ArgsKwargs((), {{}}), "
            "input_type=ArgsKwargs]"]


def logged_error(release: str, message: str) -> list[str]:
    proc = "EngineCore_DP0" if release_key(release) >= (0, 11, 0) else None
    return [*banner(release), record(release, "ERROR", "core.py:1584", message, proc, 4312)]


# Decorations a log picks up on its way to the operator (issue #16 point 3).
def compose(lines: list[str]) -> list[str]:
    return [f"vllm-1  | {line}" for line in lines]


def ansi(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        for level, colour in (("ERROR ", "\x1b[31m"), ("INFO ", "\x1b[32m")):
            line = line.replace(level, f"{colour}{level.strip()}\x1b[0m ", 1)
        out.append(line.replace("(", "\x1b[36m(", 1).replace(") ", ")\x1b[0m ", 1))
    return out


def html_escaped(lines: list[str]) -> list[str]:
    return [html.escape(line, quote=True) for line in lines]


def excerpt(lines: list[str]) -> list[str]:
    """Pasted from the middle: the banner and anything before the first error are gone."""
    return lines[1:] if len(lines) > 2 else lines


DECORATIONS: dict[str, Callable[[list[str]], list[str]]] = {
    "plain": lambda lines: lines, "compose": compose, "ansi": ansi, "html": html_escaped,
    "excerpt": excerpt,
}
