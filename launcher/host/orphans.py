"""Which vLLM processes on this host are orphans: still holding GPUs after their launcher is gone.

A vLLM-titled process hangs off the process that started the model: a vLLM API server, a vllm-gate
launcher, or a Python program using vLLM directly. Walking up through the titled processes
(workers → engine core) reaches that root. When the walk ends at init (pid 1, or an init-like
subreaper such as `tini` or `systemd --user`), nobody will ever stop them: that is an orphan. An
API server whose parent is init counts as an orphan only when vllm-gate started it (it carries
`LAUNCHED_BY_ENV` in its environment); a `nohup vllm serve` someone started by hand is a live server.

Whose it is: the launcher also gives vLLM `DEPLOYMENT_ENV` (profile@state dir), inherited by the
engine core and workers, so an orphan can be told to be this deployment's or another's. Another
user's processes do not show their environment: without the mark, only a deployment's own title
prefix (`VLLM_PROCESS_NAME_PREFIX`, when not the default) claims an orphan (docs/host-safety.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from launcher.host.gpu import GIB
from launcher.host.process_view import (
    DEFAULT_PREFIX,
    ProcessView,
    all_views,
    environ_has,
    environ_value,
    is_api_server,
    view_of,
    vllm_title,
)

# The launcher puts this in vLLM's environment (value: the profile name) so that an API server
# left behind by a dead launcher can be told from one an operator started by hand.
LAUNCHED_BY_ENV = "VLLM_GATE_PROFILE"
PREFIX_ENV = "VLLM_PROCESS_NAME_PREFIX"
DEPLOYMENT_ENV = "VLLM_GATE_DEPLOYMENT"
# py-setproctitle (vLLM's titles) overwrites the environment area that /proc/PID/environ shows, so a
# titled process's mark would be unreadable; with SPT_NOENV it keeps the title within argv instead.
KEEP_ENVIRON_ENV = {"SPT_NOENV": "1"}


def mark_env(deployment: str) -> dict[str, str]:
    """What vLLM's environment gets so that all its processes can be told to be this deployment's."""
    return {DEPLOYMENT_ENV: deployment, **KEEP_ENVIRON_ENV}


INIT_NAMES = frozenset(
    {
        "init",
        "systemd",
        "tini",
        "dumb-init",
        "docker-init",
        "catatonit",
        "s6-svscan",
        "runit",
        "containerd-shim",
    }
)
_MAX_DEPTH = 64


class Role(StrEnum):
    ORPHAN = "orphan"  # vLLM's, and whatever started it is gone
    SERVER = "server"  # part of a live model: an API server, its engine, its workers
    OTHER = "other"  # not vLLM at all


@dataclass(frozen=True, slots=True)
class HostProcess:
    view: ProcessView
    role: Role
    title: str | None  # the vLLM title, when it has one
    root: ProcessView | None  # for SERVER: what it hangs off (itself for an API server)
    deployment: str | None = None  # DEPLOYMENT_ENV of the process, when it has one and we may read it

    @property
    def pid(self) -> int:
        return self.view.pid

    @property
    def label(self) -> str:
        return self.title or self.view.label

    @property
    def prefix(self) -> str | None:
        return self.title.split("::", 1)[0] if self.title else None

    def describe(
        self, held_bytes: int | None = None, *, me: str | None = None, extra: Sequence[str] = ()
    ) -> str:
        """`pid 4242 VLLM::Worker_TP0 (orphan: its parent is gone, 29.0 GiB)`."""
        notes = []
        if self.role is Role.ORPHAN:
            notes.append("orphan: its parent is gone")
        elif self.role is Role.SERVER:
            owner = self.root
            notes.append(
                "live model server"
                if owner is None or owner.pid == self.pid
                else f"model under pid {owner.pid} {owner.shortened(40)}"
            )
        if self.role is Role.OTHER or (me is not None and self.view.user != me):
            notes.append(f"user {self.view.user}")
        if held_bytes is not None:
            notes.append(f"{held_bytes / GIB:.1f} GiB")
        notes += extra
        return f"pid {self.pid} {self.label} ({', '.join(notes)})"

    def owner(self, now: float) -> str:
        """`deployment prod@/var/lib/vllm-gate, user alice, pid 4242, age 3h12m`."""
        whose = f"deployment {self.deployment}" if self.deployment else "no deployment mark"
        return f"{whose}, user {self.view.user}, pid {self.pid}, age {_age(now - self.view.create_time)}"

    def owned_by(self, deployment: str, own_prefix: str) -> bool:
        """This deployment's: its mark says so; unmarked, its title carries our own (non-default) prefix."""
        if self.deployment is not None:
            return self.deployment == deployment
        return own_prefix != DEFAULT_PREFIX and self.prefix == own_prefix


def deployment_id(state_dir: Path, profile: str) -> str:
    """One deployment: a profile served from one state dir (tests and checkouts each have their own)."""
    return f"{profile}@{Path(state_dir).expanduser().resolve()}"


def _age(seconds: float) -> str:
    minutes = max(0, int(seconds)) // 60
    if minutes < 60:
        return f"{max(0, int(seconds))} s" if minutes == 0 else f"{minutes} min"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def prefixes_for(env: Mapping[str, str]) -> tuple[str, ...]:
    """The default prefix plus the deployment's own (`VLLM_PROCESS_NAME_PREFIX` in the plan env)."""
    own = env.get(PREFIX_ENV, "").strip()
    return (DEFAULT_PREFIX, own) if own and own != DEFAULT_PREFIX else (DEFAULT_PREFIX,)


def classify(
    view: ProcessView, prefixes: Sequence[str], views: Mapping[int, ProcessView] | None = None
) -> HostProcess:
    """Decide the role of one process (parents are read from `views`, else from /proc)."""
    title = vllm_title(view.cmdline, prefixes)
    if title is None:
        if not is_api_server(view):
            return HostProcess(view, Role.OTHER, None, None)
        role = Role.ORPHAN if _abandoned_server(view, views) else Role.SERVER
        return _marked(HostProcess(view, role, None, view if role is Role.SERVER else None))
    current = view
    for _ in range(_MAX_DEPTH):
        parent = _parent(current, views)
        if parent is None or _init_like(parent):
            return _marked(HostProcess(view, Role.ORPHAN, title, None))
        if vllm_title(parent.cmdline, prefixes) is None:
            if is_api_server(parent) and _abandoned_server(parent, views):
                return _marked(HostProcess(view, Role.ORPHAN, title, None))
            return _marked(HostProcess(view, Role.SERVER, title, parent))
        current = parent
    return _marked(HostProcess(view, Role.SERVER, title, None))


def _marked(process: HostProcess) -> HostProcess:
    mark = environ_value(process.view, DEPLOYMENT_ENV)
    return process if mark is None else replace(process, deployment=mark)


def classify_pid(pid: int, prefixes: Sequence[str]) -> HostProcess | None:
    view = view_of(pid)
    return None if view is None else classify(view, prefixes)


def scan_vllm(prefixes: Sequence[str]) -> list[HostProcess]:
    """Every vLLM process on the host (titled ones and API servers), classified."""
    views = all_views()
    found = []
    for view in views.values():
        process = classify(view, prefixes, views)
        if process.role is not Role.OTHER:
            found.append(process)
    return sorted(found, key=lambda p: p.pid)


def _parent(view: ProcessView, views: Mapping[int, ProcessView] | None) -> ProcessView | None:
    if view.ppid <= 0:
        return None
    return (views or {}).get(view.ppid) or view_of(view.ppid)


def _init_like(view: ProcessView) -> bool:
    return view.pid == 1 or view.name in INIT_NAMES


def _abandoned_server(server: ProcessView, views: Mapping[int, ProcessView] | None) -> bool:
    parent = _parent(server, views)
    return (parent is None or _init_like(parent)) and environ_has(server, LAUNCHED_BY_ENV)
