"""One model per GPU set: a per-GPU lock file, held with flock by the launcher for its server's life.

Two models loading on the same four cards at once once tripped the operator's PSU: this is a hard
rule, not a memory question. The kernel drops a flock when its holder dies, so a crashed launcher
never leaves a stale lock. The file records who holds it (pid, profile) for the refusal message;
/proc/locks names the pid when the record is unreadable. Lock fds are not inherited by vLLM.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.errors import PreflightRefused
from launcher.host.policy import gpu_demand
from launcher.host.request import HostRequest
from launcher.state.store import StateStore


@dataclass(frozen=True, slots=True)
class LockHolder:
    gpu: str
    pid: int | None
    profile: str | None
    since: str | None

    def describe(self, doing: str = "is locked by") -> str:
        who = f"launcher pid {self.pid}" if self.pid else "a process whose pid is unknown"
        profile = f"profile {self.profile!r}, " if self.profile else ""
        since = f" since {self.since}" if self.since else ""
        return f"GPU {self.gpu} {doing} {profile}{who}{since}"


def lock_path(state_dir: Path, gpu: str) -> Path:
    return StateStore(state_dir).gpu_lock_path(gpu)


class _Flocks:
    """Flocks on one file per GPU, held together from `acquire` until `release` (or the block's end);
    each file records its holder (pid, profile, since) in place."""

    def __init__(self, state_dir: Path, gpus: Sequence[str], profile: str) -> None:
        self.state_dir = state_dir
        self.gpus = tuple(gpus)
        self.profile = profile
        self._fds: dict[str, int] = {}

    def acquire(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def release(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing drops the flock
        self._fds.clear()


class GpuLocks(_Flocks):
    """All-or-nothing exclusive locks on a set of GPUs: `with GpuLocks(state, ["0", "1"], "prod"):`."""

    @classmethod
    def for_request(
        cls, request: HostRequest, state_dir: Path, environ: Mapping[str, str] | None = None
    ) -> GpuLocks:
        """The locks of the GPUs this server will use (none for a server that uses no GPU)."""
        demand = gpu_demand(request, environ)
        return cls(state_dir, demand.ids if demand.uses_gpu else (), request.profile)

    @property
    def held(self) -> bool:
        return bool(self._fds) or not self.gpus

    def acquire(self) -> None:
        """Take every lock or none; refuse naming each holder."""
        busy = []
        try:
            for gpu in self.gpus:
                fd = _open(lock_path(self.state_dir, gpu))
                if not _try_lock(fd):
                    os.close(fd)
                    busy.append(read_holder(self.state_dir, gpu))
                    continue
                self._fds[gpu] = fd
                _write_record(fd, self.profile)
        except BaseException:
            self.release()
            raise
        if busy:
            self.release()
            raise PreflightRefused(
                "one model per GPU set: " + "; ".join(h.describe() for h in busy),
                hint="stop that server first (`systemctl stop vllm-gate@PROFILE`): one model per GPU",
            )


LOAD_POLL_S = 0.5  # how often a start waiting for another engine's load tries the locks again
LOAD_WAIT_S = 1800.0  # a load that long is a hung start: the waiting one is refused, naming it
LOAD_SAID_S = 10.0  # how often the wait is said again on the progress line


def load_lock_path(state_dir: Path, gpu: str) -> Path:
    return StateStore(state_dir).gpu_load_lock_path(gpu)


class LoadLocks(_Flocks):
    """Never two engines *loading* at once on one GPU: the power drawn while weights load, memory is
    profiled and CUDA graphs are captured once tripped a PSU with two models on four cards. Every start
    of this project's engines takes these flocks before it spawns and lets go once the engine is ready
    (or gone); a start that finds one taken waits, saying who loads, up to LOAD_WAIT_S."""

    def __init__(
        self,
        state_dir: Path,
        gpus: Sequence[str],
        profile: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        said: Callable[[str], None] | None = None,
        wait_s: float = LOAD_WAIT_S,
    ) -> None:
        super().__init__(state_dir, gpus, profile)
        self.clock = clock
        self.said = said
        self.wait_s = wait_s

    def acquire(self) -> None:
        """Take every GPU's load lock, waiting while another engine loads on any of them."""
        started = self.clock.monotonic()
        said_at: float | None = None
        while True:
            busy = self._try_all()
            if not busy:
                return
            now = self.clock.monotonic()
            who = "; ".join(h.describe("is loading for") for h in busy)
            if now - started >= self.wait_s:
                raise PreflightRefused(
                    f"another engine is still loading on these GPUs after {self.wait_s:.0f} s: {who}",
                    hint="two engines never load on one GPU set at once; look at that start",
                )
            if self.said is not None and (said_at is None or now - said_at >= LOAD_SAID_S):
                self.said(f"waiting: {who}")
                said_at = now
            self.clock.sleep(LOAD_POLL_S)

    def _try_all(self) -> list[LockHolder]:
        """Every lock, or none and who holds the busy ones."""
        busy = []
        for gpu in self.gpus:
            fd = _open(load_lock_path(self.state_dir, gpu))
            if _try_lock(fd, attempts=1):
                self._fds[gpu] = fd
                _write_record(fd, self.profile)
                continue
            os.close(fd)
            busy.append(_holder_of(load_lock_path(self.state_dir, gpu), gpu))
        if busy:
            self.release()
        return busy


def busy_holders(state_dir: Path, gpus: Sequence[str]) -> list[LockHolder]:
    """Holders of the GPUs' locks other than this process (a probe: takes and drops each lock)."""
    busy = []
    for gpu in gpus:
        path = lock_path(state_dir, gpu)
        if not path.exists():
            continue
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            holder = read_holder(state_dir, gpu)
            if holder.pid != os.getpid():
                busy.append(holder)
        finally:
            os.close(fd)
    return busy


def read_holder(state_dir: Path, gpu: str) -> LockHolder:
    return _holder_of(lock_path(state_dir, gpu), gpu)


def _holder_of(path: Path, gpu: str) -> LockHolder:
    record: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(path.read_text(encoding="utf-8") or "{}")
        record = loaded if isinstance(loaded, dict) else {}
    pid = record.get("pid") if isinstance(record.get("pid"), int) else _kernel_holder(path)
    return LockHolder(gpu, pid, record.get("profile"), record.get("since"))


def _try_lock(fd: int, attempts: int = 5) -> bool:
    """A few tries 20 ms apart: `busy_holders` (a `launch preflight` elsewhere) holds a lock briefly."""
    for attempt in range(attempts):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < attempts:
                time.sleep(0.02)
    return False


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _write_record(fd: int, profile: str) -> None:
    # Same inode, rewritten in place: the flock is on the inode, so no atomic rename here.
    since = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    data = json.dumps({"pid": os.getpid(), "profile": profile, "since": since}) + "\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data.encode(), 0)


def _kernel_holder(path: Path) -> int | None:
    """The pid /proc/locks gives for a FLOCK on this file's inode."""
    try:
        st = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].endswith(f":{st.st_ino}"):
            return int(fields[4]) if fields[4].isdigit() else None
    return None
