"""Writes lines the way vLLM's processes do: prefixed log records on stdout, raw lines on stderr.

Each record is one `os.write` so lines from the API, engine and workers interleave whole. Multi-line
messages are re-prefixed and joined with `\\r\\n`, as vLLM's `NewLineFormatter` does (vllm-facts.md §1).
"""

from __future__ import annotations

import contextlib
import os
import time

from vllm_sim.versions import Dialect

BAR_WIDTH = 10
_PARTIAL = " ▏▎▍▌▋▊▉"


class LogWriter:
    """The log of one process (`APIServer`, `EngineCore`, `Worker_TP1`...)."""

    def __init__(self, name: str, dialect: Dialect, out_fd: int = 1, err_fd: int = 2) -> None:
        self.name = name
        self.dialect = dialect
        self.out_fd = out_fd
        self.err_fd = err_fd
        self.pid = os.getpid()
        self.logging_prefix = os.environ.get("VLLM_LOGGING_PREFIX", "")

    def _prefix(self, level: str, src: str) -> str:
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime())
        return f"{self.logging_prefix}({self.name} pid={self.pid}) {level} {stamp} [{src}] "

    def record(self, level: str, src: str, message: str) -> None:
        prefix = self._prefix(level, src)
        text = "\r\n".join(prefix + line for line in message.split("\n"))
        self._write(self.out_fd, text + "\n")

    def info(self, src: str, message: str) -> None:
        self.record("INFO", src, message)

    def warning(self, src: str, message: str) -> None:
        self.record("WARNING", src, message)

    def error(self, src: str, message: str) -> None:
        self.record("ERROR", src, message)

    def raw(self, text: str, stderr: bool = True) -> None:
        """A line vLLM does not format (uvicorn, tracebacks, print); older vLLM prefixed it too."""
        if self.dialect.prefix_streams:
            text = f"({self.name} pid={self.pid}) {text}"
        self._write(self.err_fd if stderr else self.out_fd, text + "\n")

    def native(self, text: str) -> None:
        """A line a C++ extension writes with `std::cerr`: vLLM prefixes Python's streams only, so
        never this one (vllm-facts.md §16)."""
        self._write(self.err_fd, text + "\n")

    def bar_update(self, text: str, first: bool, last: bool) -> None:
        """One tqdm redraw: `\\r`-separated on one line, a newline only when the bar closes.

        tqdm starts every redraw with `\\r`; 0.33 shows the first one without it. Older vLLM's
        `_add_prefix` writes the prefix before the first write of a line, so the line reads
        `(EngineCore pid=N) \\rCapturing ...` (the real 0.26.0 log)."""
        lead = "" if first else "\r"
        if first and self.dialect.prefix_streams:
            lead = f"({self.name} pid={self.pid}) \r"
        self._write(self.err_fd, lead + text + ("\n" if last else ""))

    @staticmethod
    def _write(fd: int, text: str) -> None:
        with contextlib.suppress(OSError):  # a closed pipe must not kill the simulated server
            os.write(fd, text.encode("utf-8", "replace"))


def format_seconds(secs: float) -> str:
    minutes, seconds = divmod(int(secs), 60)
    return f"{minutes:02d}:{seconds:02d}"


def tqdm_line(desc: str, n: int, total: int, elapsed: float, shards: bool = False) -> str:
    """A tqdm bar as vLLM shows it (e.g. `Capturing CUDA graphs (FULL): 100%|██████████| 2/2 [...]`)."""
    frac = n / total if total else 1.0
    pct = int(frac * 100)
    rate = n / elapsed if elapsed > 0 and n > 0 else None
    if rate is None:
        rate_text, remaining = "?it/s", "?"
    else:
        rate_text = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
        remaining = format_seconds((total - n) / rate)
    timing = f"[{format_seconds(elapsed)}<{remaining}, {rate_text}]"
    if shards:
        return f"{desc}: {pct:3d}% Completed | {n}/{total} {timing}"
    filled = frac * BAR_WIDTH
    whole = int(filled)
    bar = "█" * whole
    if whole < BAR_WIDTH:
        bar += _PARTIAL[int((filled - whole) * len(_PARTIAL))]
        bar += " " * (BAR_WIDTH - whole - 1)
    return f"{desc}: {pct:3d}%|{bar}| {n}/{total} {timing}"
