"""The checks that need no GPU: host RAM, swap, the port, the model path, the restart guard.

Each is a function from what it measured to a `CheckResult`, so the decision can be tested on
numbers and the measuring on the real host.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import psutil

from launcher.host.gpu import GIB
from launcher.host.orphans import DEPLOYMENT_ENV
from launcher.host.process_view import environ_value, is_api_server, view_of
from launcher.host.report import CheckName, CheckResult, ok, refused, skipped, warned
from launcher.host.restart_guard import GuardStatus


def check_host_memory(available_bytes: int, min_gib: float) -> CheckResult:
    have = available_bytes / GIB
    if have < min_gib:
        return refused(
            CheckName.HOST_MEMORY,
            f"host RAM: {have:.2f} GiB available < {min_gib:g} GiB required "
            "(preflight.min_host_available_gib)",
            "free host memory first; vLLM loads weights through host RAM",
            available_gib=round(have, 2),
        )
    return ok(
        CheckName.HOST_MEMORY,
        f"host RAM: {have:.2f} GiB available >= {min_gib:g} GiB",
        available_gib=round(have, 2),
    )


def check_swap(used_bytes: int, max_gib: float | None) -> CheckResult:
    used = used_bytes / GIB
    if max_gib is None:
        return skipped(
            CheckName.SWAP,
            f"preflight.max_swap_used_gib not set (swap used {used:.2f} GiB)",
            used_gib=round(used, 2),
        )
    if used > max_gib:
        return refused(
            CheckName.SWAP,
            f"swap: {used:.2f} GiB in use > {max_gib:g} GiB allowed (preflight.max_swap_used_gib)",
            "the host is swapping: find what holds the memory before loading a model",
            used_gib=round(used, 2),
        )
    return ok(CheckName.SWAP, f"swap: {used:.2f} GiB in use <= {max_gib:g} GiB", used_gib=round(used, 2))


def measure_host() -> tuple[int, int]:
    """(RAM available, swap used) in bytes."""
    return psutil.virtual_memory().available, psutil.swap_memory().used


def check_port(
    host: str, port: int, serving: frozenset[int] = frozenset(), *, name_holders: bool = True
) -> CheckResult:
    """Bind host:port as vLLM will (SO_REUSEADDR: a TIME_WAIT leftover does not block vLLM either).
    Held by `serving` (the engine a reload will stop first) counts as free. `name_holders=False`:
    only whether it binds — finding the holder walks every process's sockets, too dear for a poll."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as err:
        return refused(
            CheckName.PORT, f"port: cannot resolve host {host!r}: {err.strerror}", "fix engine.host"
        )
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                return refused(
                    CheckName.PORT,
                    f"port: cannot bind {host}:{port}: {err.strerror}",
                    "fix engine.host/engine.port",
                )
            if not name_holders:
                return refused(CheckName.PORT, f"port: {host}:{port} is in use", "")
            listeners = _listeners(port)
            if serving and listeners and set(listeners) <= serving:
                return ok(CheckName.PORT, f"port: {host}:{port} is held by the serving engine, stopped first")
            by_hand = _hand_started(listeners)
            hint = "stop what listens there, or give the profile another engine.port"
            if by_hand:
                hint = (
                    f"pid {by_hand} is a vLLM server no launcher started (no deployment mark), so none will "
                    f"stop it: stop it where it was started (as its user: `kill {by_hand}`), or give the "
                    "profile another engine.port"
                )
            return refused(CheckName.PORT, f"port: {host}:{port} is in use{_port_holder(listeners)}", hint)
    return ok(CheckName.PORT, f"port: {host}:{port} is free")


def _listeners(port: int) -> list[int]:
    try:
        conns = psutil.net_connections(kind="inet")
    except psutil.Error:
        return []
    return sorted(
        {
            c.pid
            for c in conns
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid
        }
    )


def _hand_started(pids: list[int]) -> str:
    """The listeners that are vLLM API servers without a launcher's mark: started by hand."""
    views = [v for v in (view_of(pid) for pid in pids) if v is not None and is_api_server(v)]
    return " ".join(str(v.pid) for v in views if environ_value(v, DEPLOYMENT_ENV) is None)


def _port_holder(pids: list[int]) -> str:
    views = [v for v in (view_of(pid) for pid in pids) if v is not None]
    return " by " + ", ".join(f"pid {v.pid} {v.label}" for v in views) if views else ""


def check_model_path(model: str | None) -> CheckResult:
    """A model that looks like a local path must be readable; a hub name (`org/name`) is vLLM's business."""
    if not model:
        return skipped(CheckName.MODEL_PATH, "no engine.model")
    path = Path(model).expanduser()
    local = model.startswith(("/", "./", "../", "~")) or path.exists()
    if not local:
        return skipped(CheckName.MODEL_PATH, f"{model!r} is not a local path (a hub name?)")
    if not path.exists():
        return refused(CheckName.MODEL_PATH, f"model path {model} does not exist", "fix engine.model")
    mode = os.R_OK | (os.X_OK if path.is_dir() else 0)
    if not os.access(path, mode):
        return refused(
            CheckName.MODEL_PATH,
            f"model path {model} is not readable by uid {os.geteuid()}",
            "fix its permissions",
        )
    return ok(CheckName.MODEL_PATH, f"model path {model} is readable")


def check_restart_guard(status: GuardStatus) -> CheckResult:
    data = {"fingerprint": status.fingerprint, "failures": status.failures, "retry_at": status.retry_at}
    if status.blocked:
        return refused(
            CheckName.RESTART_GUARD,
            status.describe(),
            "a changed profile is a new candidate; or wait until the window has passed",
            **data,
        )
    if status.note:
        hint = "look at the file: the next start that fails or passes rewrites it and keeps this one aside"
        return warned(CheckName.RESTART_GUARD, status.describe(), hint, **data)
    return ok(CheckName.RESTART_GUARD, status.describe(), **data)
