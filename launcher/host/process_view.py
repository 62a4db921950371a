"""A process as the host checks see it: pid, parent, command line, user; and what vLLM's look like.

vLLM titles its engine and workers `PREFIX::EngineCore`, `PREFIX::Worker_TP0`, ... (vllm-facts.md §6; the
prefix is `VLLM_PROCESS_NAME_PREFIX`, default `VLLM`). /proc/PID/comm keeps only 15 bytes, so the
title is matched on the command line, never on `name()`. The API server keeps its own command line
(`vllm serve ...`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

import psutil

DEFAULT_PREFIX = "VLLM"
# Roles vLLM 0.33 titles its processes with (vllm-facts.md §6); a prefix we were not told about only
# counts when followed by one of these, so an unrelated `Foo::Bar` process is never vLLM's.
_KNOWN_ROLE = re.compile(r"^[^\s:/]+::(EngineCore|Worker|APIServer|DPCoordinator)(_\w+)?\b")
_LABEL_MAX = 72


@dataclass(frozen=True, slots=True)
class ProcessView:
    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    user: str
    uid: int
    create_time: float

    @property
    def label(self) -> str:
        """Short form for messages: `VLLM::Worker_TP0`, `python train.py --lr 3e-4`."""
        return self.shortened(_LABEL_MAX)

    def shortened(self, limit: int) -> str:
        if not self.cmdline:
            return f"[{self.name}]"
        first = self.cmdline[0]
        head = first if "::" in first else PurePath(first).name
        text = " ".join((head, *self.cmdline[1:])).strip()
        return text if len(text) <= limit else text[: limit - 1] + "…"


def view_of(pid: int) -> ProcessView | None:
    """A snapshot of `pid`, or None when it is gone (or is pid 0)."""
    if pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return _view(proc)
    except psutil.NoSuchProcess:
        return None


def all_views() -> dict[int, ProcessView]:
    """Every process this user can see, in one pass."""
    views = {}
    for proc in psutil.process_iter():
        try:
            with proc.oneshot():
                views[proc.pid] = _view(proc)
        except psutil.NoSuchProcess:
            continue
    return views


def _view(proc: psutil.Process) -> ProcessView:
    try:
        cmdline = tuple(proc.cmdline())
        while cmdline and not cmdline[-1]:  # setproctitle pads the argv area with empty strings
            cmdline = cmdline[:-1]
    except (psutil.AccessDenied, psutil.ZombieProcess):
        cmdline = ()
    try:
        user = proc.username()
    except (psutil.AccessDenied, KeyError):
        user = str(proc.uids().real)
    return ProcessView(
        pid=proc.pid,
        ppid=proc.ppid(),
        name=proc.name(),
        cmdline=cmdline,
        user=user,
        uid=proc.uids().real,
        create_time=proc.create_time(),
    )


def vllm_title(cmdline: Sequence[str], prefixes: Sequence[str]) -> str | None:
    """The process's vLLM title (`VLLM::Worker_TP0`) if it has one.

    setproctitle rewrites the argv area, so the title starts argv[0] (psutil may return it whole or
    split on spaces). Only the start is looked at: `pgrep -f VLLM::Worker` is not a worker.
    """
    if not cmdline:
        return None
    text = " ".join(cmdline).strip()
    if any(text.startswith(prefix + "::") for prefix in prefixes) or _KNOWN_ROLE.match(text):
        return text.split()[0]
    return None


def is_api_server(view: ProcessView) -> bool:
    """`vllm serve ...`, `vllm-sim serve ...`, or vLLM's entrypoint modules run with `python -m`."""
    args = view.cmdline
    for i, arg in enumerate(args):
        base = PurePath(arg).name
        if base in ("vllm", "vllm-sim") and i + 1 < len(args) and args[i + 1] == "serve":
            return True
        if arg.startswith(("vllm.entrypoints", "vllm_sim")):
            return True
    return False


def environ_has(view: ProcessView, name: str) -> bool:
    """Whether the process was started with `name` in its environment (False when we may not look)."""
    try:
        return name in psutil.Process(view.pid).environ()
    except psutil.Error:
        return False


def environ_value(view: ProcessView, name: str) -> str | None:
    """`name` from the process's environment (None when absent, or when we may not look)."""
    try:
        value = psutil.Process(view.pid).environ().get(name)
    except psutil.Error:
        return None
    return str(value) if value is not None else None


def my_lineage() -> frozenset[int]:
    """This process and its ancestors: never signalled, whatever else is asked."""
    pids = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        pids.update(p.pid for p in psutil.Process().parents())
    return frozenset(pids)
