"""Watch every vital process of the engine, not only the API server: the first to die ends it.

vLLM's engine core and workers are children of the API server, not of the launcher. SIGKILL of
`VLLM::EngineCore` on 0.26.0 (H200) left the API server up for 4.36 s, until vLLM's own watchdog
ended it with exit code 0; a launcher waiting on the API server alone noticed late and named the
wrong process. Here each vLLM-titled descendant gets a pidfd, which turns readable the moment that
process exits (no health polling); the descendants are re-read every `REFRESH_S`, since workers
appear during startup and set their title only once running (every `SETTLED_REFRESH_S` once none
has appeared for a while: reading the process table costs CPU on a shared host). Untitled helpers (compiler
subprocesses, multiprocessing's resource tracker) come and go and are not watched. `refresh_now()`
re-reads them at once and returns when that is done: before promotion, so that every process that
serves is watched even when the engine started faster than one `REFRESH_S` (the simulator's 0.06 s
startup once let a SIGKILLed engine core go unnamed until its API server exited 12 s later). The
engine is whole then, so from that re-read on the table is read at the settled pace.

A process that is not our child cannot be waited for, so its exit status is read from
/proc/PID/stat (field 52, `exit_code`, Linux >= 3.5) while it is a zombie, before its parent
reaps it; when the parent was faster, from the kernel's process connector, which announced the exit
(launcher/host/exit_events.py, where the launcher may listen); only when neither could be read is
its status "not readable". `Death.source` says which one named it.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable, Sequence

import psutil

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.host.exit_events import ExitEvents
from launcher.host.process_view import vllm_title
from launcher.supervisor.seams import SOURCE_CONNECTOR, SOURCE_ZOMBIE, Death

REFRESH_S = 0.5
SETTLED_REFRESH_S = 5.0  # once no new process has appeared for SETTLE_ROUNDS re-reads (serving)
SETTLE_ROUNDS = 20
_EXIT_CODE_FIELD = 49  # field 52 of /proc/PID/stat, counted from field 3 (after the command name)


def zombie_wait_status(pid: int) -> int | None:
    """The wait status the kernel keeps for an exited, not yet reaped process (else None)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) <= _EXIT_CODE_FIELD or fields[0] not in ("Z", "X"):
        return None
    try:
        return int(fields[_EXIT_CODE_FIELD])
    except ValueError:
        return None


class GroupWatch:
    """Calls `on_death` once, for the first titled descendant of `leader_pid` that ends.

    Constructing starts nothing; `start()` starts the thread, `stop()` ends it (idempotent)."""

    def __init__(
        self,
        leader_pid: int,
        prefixes: Sequence[str],
        on_death: Callable[[Death], None],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.leader_pid = leader_pid
        self.clock = clock
        self.prefixes = tuple(prefixes)
        self.on_death = on_death
        self._stopped = threading.Event()
        self._wake_r, self._wake_w = -1, -1
        self._watched: dict[int, tuple[int, str]] = {}  # pid -> (pidfd, title)
        self._seen: set[int] = set()
        self._thread: threading.Thread | None = None
        self._rounds = threading.Condition()
        self._asked = 0  # refresh_now() calls so far
        self._done = 0  # of them, how many a finished re-read began after
        self._settled = False  # re-reading every SETTLED_REFRESH_S, no longer every REFRESH_S
        self.exits = ExitEvents()

    def start(self) -> None:
        if not hasattr(os, "pidfd_open"):
            return  # no pidfds (old kernel or Python): the API server's own exit is still seen
        self._wake_r, self._wake_w = os.pipe()
        self.exits.open()  # before any process of the group can die unseen
        self._thread = threading.Thread(target=self._run, name="engine-group-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def refresh_now(self, timeout_s: float = 2.0) -> bool:
        """Re-read the descendants at once; True once a re-read that began after this call ended
        (False: not running, stopped, or not done within `timeout_s`)."""
        if self._thread is None or self._stopped.is_set():
            return False
        with self._rounds:
            self._asked += 1
            mine = self._asked
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"r")
            return self._rounds.wait_for(
                lambda: self._done >= mine or self._stopped.is_set(), timeout_s
            ) and (self._done >= mine)

    @property
    def settled(self) -> bool:
        """True once the table is re-read at the settled pace (quiet for a while, or refresh_now())."""
        return self._settled

    def watched(self) -> dict[int, str]:
        return {pid: title for pid, (_, title) in list(self._watched.items())}

    def _run(self) -> None:
        quiet = 0
        try:
            while not self._stopped.is_set():
                with self._rounds:
                    asked = self._asked
                quiet = 0 if self._refresh() else quiet + 1
                with self._rounds:
                    if asked > self._done:
                        quiet = SETTLE_ROUNDS  # asked for before promotion: the engine is whole
                    self._done = asked
                    self._settled = quiet >= SETTLE_ROUNDS
                    self._rounds.notify_all()
                death = self._wait(SETTLED_REFRESH_S if self._settled else REFRESH_S)
                if death is not None and not self._stopped.is_set():
                    self._stopped.set()
                    self.on_death(death)
                    return
        finally:
            with self._rounds:
                self._rounds.notify_all()  # a refresh_now() waiting sees the stop
            for fd, _ in self._watched.values():
                os.close(fd)
            self._watched.clear()
            self.exits.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _refresh(self) -> bool:
        """Watch titled descendants not yet watched; True when a process not seen before is there."""
        try:
            children = psutil.Process(self.leader_pid).children(recursive=True)
        except psutil.Error:
            return False
        fresh = False
        for child in children:
            if child.pid in self._watched:
                continue
            if child.pid not in self._seen:
                self._seen.add(child.pid)
                fresh = True  # a new process: more may follow, or it may still set its title
            try:
                title = vllm_title(child.cmdline(), self.prefixes)
                if title is None:
                    continue
                fd = os.pidfd_open(child.pid)
            except (psutil.Error, OSError):
                continue
            self._watched[child.pid] = (fd, title)
        return fresh

    def _wait(self, timeout_s: float) -> Death | None:
        """Until `timeout_s` passes, a wake (stop, refresh_now) or a watched process's death. The
        host's other exits only fill the connector's memory: waking to re-read the process table on
        each of them cost a launcher 0.4 CPU-s in an 8 s start beside 50 exits a second."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        if self.exits.fileno() >= 0:
            poller.register(self.exits.fileno(), select.POLLIN)
        by_fd = {fd: (pid, title) for pid, (fd, title) in self._watched.items()}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        deadline = self.clock.monotonic() + timeout_s
        while (left := deadline - self.clock.monotonic()) > 0:
            for fd, _ in poller.poll(max(1, int(left * 1000))):
                if fd == self._wake_r:
                    os.read(self._wake_r, 64)  # a stop, or refresh_now(): the loop reads the table again
                    return None
                if fd in by_fd:
                    pid, title = by_fd[fd]
                    return self._death_of(pid, title)
                self.exits.drain()  # the host's exits, kept a while: one of ours may be among them
        return None

    def _death_of(self, pid: int, title: str) -> Death:
        noticed = self.clock.monotonic()
        status = zombie_wait_status(pid)
        if status is not None:
            return Death(pid, title, status, noticed, SOURCE_ZOMBIE)
        status = self.exits.wait_status(pid)
        return Death(pid, title, status, noticed, SOURCE_CONNECTOR if status is not None else None)
