"""The real vLLM 0.26.0 runs of tests/data/real-vllm-0.26/ as simulator settings, and any log as records.

Unit tests of the simulator's log lines run its pieces in-process against what the real runs logged:
each run here is the command line its `non-default args:` line shows (the `tiny` profile of
scripts/real-vllm/profiles, as scripts/real-vllm/fidelity.py starts it), the GPU its memory summary
names (139.8 GiB), and the environment its log reveals (FlashInfer's sampler switched off; the
launcher's `VLLM_GATE_PROFILE`, which vLLM warns about, where that run had it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from vllm_flags.schema import load_snapshot
from vllm_sim.config import SimConfig, from_namespace
from vllm_sim.logline import LogWriter
from vllm_sim.serve_args import parse
from vllm_sim.versions import V026

DATA = Path(__file__).parent / "data" / "real-vllm-0.26"
SCHEMA = load_snapshot()
# tiny.log's `non-default args:`; its KV bytes per token from 27.61 GiB for 28,947,616 tokens
TINY = (
    "/root/tiny", "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--host", "127.0.0.1",
    "--port", "8011", "--max-model-len", "2048", "--served-model-name", "tiny",
    "--gpu-memory-utilization", "0.2",
    "--sim-vllm-version", "0.26", "--sim-kv-bytes-per-token", "1024", "--sim-gpu-memory-gib", "139.8",
)  # fmt: skip
NGRAM = (
    "--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8]}',
    "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}',
)  # fmt: skip
NO_FLASHINFER = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
WITH_PROFILE = {**NO_FLASHINFER, "VLLM_GATE_PROFILE": "tiny"}


@dataclass(frozen=True, slots=True)
class Run:
    log: str  # under DATA
    extra: tuple[str, ...]  # flags beyond TINY
    env: dict[str, str]  # the VLLM_* variables the run had

    def text(self) -> str:
        return (DATA / self.log).read_text(encoding="utf-8")


RUNS = {
    "tiny": Run("tiny.log", (), WITH_PROFILE),
    "tiny-ngram": Run("tiny-ngram.log", NGRAM, WITH_PROFILE),
    "eager": Run("eager/vllm.log", ("--api-key", "sk-record-not-a-secret", "--enforce-eager"), NO_FLASHINFER),
    "free-memory": Run("free-memory.log", ("--sim-free-memory-gib", "18.77"), WITH_PROFILE),
    "kv-small": Run(
        "kv-small/vllm.log", ("--enforce-eager", "--kv-cache-memory-bytes", "262144"), NO_FLASHINFER
    ),
    "reasoning": Run("reasoning/vllm.log", ("--reasoning-parser", "nope-parser"), NO_FLASHINFER),
}

_RECORD = re.compile(
    r"^\((?P<process>[A-Za-z_0-9]+) pid=\d+\) (?P<level>INFO|WARNING|ERROR|DEBUG) "
    r"\d\d-\d\d \d\d:\d\d:\d\d \[(?P<src>[^\]]+)\] (?P<text>.*)$"
)


@dataclass(frozen=True, slots=True)
class Record:
    """One line of a log record (a multi-line message is one Record per line, each prefixed)."""

    process: str
    level: str
    src: str
    text: str


def records(text: str, process: str | None = None) -> list[Record]:
    """The prefixed log records of `text` (raw stderr lines left out), of one process if given."""
    found = []
    for line in re.split(r"\r?\n", text):
        match = _RECORD.match(line)
        if match and (process is None or match["process"] == process):
            found.append(Record(match["process"], match["level"], match["src"], match["text"]))
    return found


def sim_config(run: Run, *more: str, environ: dict[str, str] | None = None) -> SimConfig:
    """The run's settings, with `more` flags; `environ` is what the config reads (none by default)."""
    ns = parse(["serve", *TINY, *run.extra, *more], SCHEMA, environ={})
    return from_namespace(ns, SCHEMA, environ=environ or {})


def use_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """The run's VLLM_* variables and none of the test's own (the simulator reads os.environ)."""
    for name in list(os.environ):
        if name.startswith("VLLM_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@contextmanager
def captured(name: str, tmp_path: Path) -> Iterator[tuple[LogWriter, Path]]:
    """A 0.26.0 LogWriter whose stdout and stderr go to one file: what a process of `name` wrote."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        yield LogWriter(name, V026, fd, fd), path
    finally:
        os.close(fd)
