"""The vLLM engine as a process group: start it, stream its output, notice its death, stop it all.

vLLM does not call setpgrp (vllm-facts.md §6), so starting it in a new session makes `killpg` reach the
API server, EngineCore and every worker. Stopping escalates TERM → grace → KILL on the whole group,
then checks that no process of the group is left.

Death is noticed for the whole engine (`group_watch`): the API server through `wait()`, its engine
core and workers through pidfds. The death is recorded first and the pipe drained after: a killed
API server can leave an engine core that holds the pipe open until the group is stopped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.host.orphans import prefixes_for
from launcher.procgroup import group_members, process_tree
from launcher.redact import LineRedactor, secret_values
from launcher.supervisor.group_watch import GroupWatch
from launcher.supervisor.logkeeper import start_keeper, whole_line_chunks
from launcher.supervisor.seams import Death, LineSink, StopReport

GONE_POLL_S = 0.05  # how often a stop looks whether the group is gone


def resolve_program(program: str, env: Mapping[str, str]) -> str:
    """A bare name is looked up on PATH, then beside this Python (the venv that holds `launch` also
    holds `vllm` or `vllm-sim`, even when that venv's bin is not on PATH)."""
    if os.sep in program:
        return program
    search = os.pathsep.join(p for p in (env.get("PATH", os.defpath), os.path.dirname(sys.executable)) if p)
    return shutil.which(program, path=search) or program


# Run between fork and vLLM's exec, in the child: the kernel will SIGTERM it when the launcher dies,
# SIGKILL included (PR_SET_PDEATHSIG = 1; it survives exec). A preexec_fn would do the same inside
# Popen, but is unsafe in a process with threads, as the launcher is.
_DEATH_SIGNAL_SHIM = (
    "import os, sys\n"
    "try:\n"
    "    import ctypes, signal\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
    "except Exception:\n"
    "    pass  # best effort: systemd's KillMode or the next preflight still end the engine\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)  # the launcher died before the prctl\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def die_with_this_process(argv: list[str]) -> list[str]:
    """`argv` run so that it gets SIGTERM when this process dies, however it dies.

    Why: a launcher killed with SIGKILL cannot stop its engine, and vLLM's engine core outlives a
    killed API server (29 GB held on the H200, docs/real-vllm.md step 4). SIGTERM lets the API server
    shut its engine down itself. Under systemd, KillMode=control-group does this for the whole cgroup;
    this covers a launcher run by hand. The engine is started from the launcher's main thread (the
    signal follows the thread that forked), in its own session, so a terminal's signals miss it.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return argv
    return [sys.executable, "-I", "-S", "-c", _DEATH_SIGNAL_SHIM, str(os.getpid()), *argv]


class EngineProcess:
    """Constructing starts nothing; `start()` spawns, `stop()` ends the whole group.

    With a `log_path`, vLLM's output goes through the log keeper (`logkeeper.py`), which writes the
    file and outlives the launcher; the sink gets the same lines from it."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        sink: LineSink,
        log_path: Path | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        self.argv = list(argv)
        self.env = dict(env)
        self.sink = sink
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._keeper: subprocess.Popen[bytes] | None = None
        self._readers: list[threading.Thread] = []
        self.exited = threading.Event()
        self.death: Death | None = None
        self._death_lock = threading.Lock()
        self._on_exit: list[Callable[[], None]] = []
        self._on_death: list[Callable[[], None]] = []
        self._group_watch: GroupWatch | None = None
        self._finished = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def keeper_pid(self) -> int | None:
        """The log keeper's pid (it outlives this process until vLLM's pipe closes), if one runs."""
        return self._keeper.pid if self._keeper else None

    @property
    def pgid(self) -> int | None:
        return self._proc.pid if self._proc else None  # session leader: pgid == pid

    def on_exit(self, callback: Callable[[], None]) -> None:
        """Called once the engine is dead and its output drained (or given up on)."""
        self._on_exit.append(callback)

    def on_death(self, callback: Callable[[], None]) -> None:
        """Called the moment any vital process of the engine ends, before anything is drained."""
        self._on_death.append(callback)

    def start(self) -> None:
        program = resolve_program(self.argv[0], self.env)
        if not (os.sep in program and os.access(program, os.X_OK)):
            from launcher.errors import BadInput

            raise BadInput(
                f"cannot start {self.argv[0]!r}: not found or not executable", hint="check engine.command"
            )
        keeper_pipe = None
        if self.log_path is not None:
            self._keeper, keeper_pipe = start_keeper(self.log_path, self.env)
        self._proc = self._spawn(program, keeper_pipe)
        stream = self._keeper.stdout if self._keeper is not None else self._proc.stdout
        assert stream is not None
        reader = threading.Thread(
            target=self._pump, args=("output", stream), name="engine-output", daemon=True
        )
        reader.start()
        self._readers.append(reader)
        threading.Thread(target=self._watch, name="engine-waiter", daemon=True).start()
        self._group_watch = GroupWatch(self._proc.pid, prefixes_for(self.env), self._member_died, self.clock)
        self._group_watch.start()

    def _spawn(self, program: str, keeper_pipe: int | None) -> subprocess.Popen[bytes]:
        """vLLM in a new session, its output into the keeper's pipe (else a pipe of ours); a keeper
        left without its writer is reaped."""
        proc: subprocess.Popen[bytes] | None = None
        try:
            proc = subprocess.Popen(
                die_with_this_process([program, *self.argv[1:]]),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if keeper_pipe is None else keeper_pipe,
                # One pipe for both streams, as a terminal or journald sees them: vLLM logs the KV
                # line on stdout and draws capture bars on stderr, and two pipes would lose their order.
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as err:  # this Python itself could not be started: no memory, no pids
            from launcher.errors import BadInput

            raise BadInput(
                f"cannot start {self.argv[0]!r}: {err.strerror or err}", hint="check engine.command"
            ) from err
        finally:
            if keeper_pipe is not None:
                os.close(keeper_pipe)  # vLLM holds the only write end: the keeper's EOF is vLLM's end
            if proc is None and self._keeper is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._keeper.wait(timeout=5.0)  # no writer: it ends at once
        return proc

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        """Whole lines go on, with secrets masked (vLLM logs `'api_key': [...]` in its non-default
        args): a key split across two reads would slip past a per-chunk mask. The keeper masked
        them already; masking twice changes nothing."""
        redact = LineRedactor(secret_values(self.env))
        for text in whole_line_chunks(stream):
            self.sink(name, redact(text))
        if self._keeper is not None:  # its stdout is closed: it is ending, reap it
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._keeper.wait(timeout=5.0)

    def _watch(self) -> None:
        assert self._proc is not None
        code = self._proc.wait()
        self._record(Death.from_returncode(self._proc.pid, "API server", code, self.clock.monotonic()))
        for reader in self._readers:  # the last lines before death belong to the log
            reader.join(timeout=0.3)
        self._finish()

    def _member_died(self, death: Death) -> None:
        self._record(death)
        self.exited.set()  # dead, though the API server still holds the pipe: drained in stop()

    def _record(self, death: Death) -> None:
        with self._death_lock:
            if self.death is not None:
                return
            self.death = death
        for callback in self._on_death:
            callback()

    def _finish(self) -> None:
        """Dead and drained: `on_exit` callbacks run once (they may flush what the readers fed)."""
        with self._death_lock:
            if self._finished:
                return
            self._finished = True
        self.exited.set()
        for callback in self._on_exit:
            callback()

    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def exit_description(self) -> str | None:
        """None while whole; else which process ended and how (`VLLM::EngineCore pid 4360 killed
        by SIGKILL`); the API server's own end keeps the short form (`exited with code 1`)."""
        death = self.death if self.exited.is_set() else None
        if death is None:
            return None
        return death.how() if death.name == "API server" else death.describe()

    def process_tree(self) -> list[int]:
        if self._proc is None or self.exited.is_set():
            return []
        return process_tree(self._proc.pid)

    def watch_every_process(self) -> None:
        if self._group_watch is not None:
            self._group_watch.refresh_now()

    def group_members(self) -> list[int]:
        """Live (non-zombie) processes still in the engine's process group."""
        return [] if self.pgid is None else group_members(self.pgid)

    def stop(self, grace_s: float, kill_wait_s: float = 10.0) -> StopReport:
        clock = self.clock
        started = clock.monotonic()
        if self._proc is None:
            return StopReport(True, False, (), 0.0)
        if self._group_watch is not None:
            self._group_watch.stop()  # what we end now is no news
        self._signal_group(signal.SIGTERM)
        self._signal_group(signal.SIGCONT)  # a stopped (wedged) process acts on SIGTERM only once continued
        graceful = self._wait_group_gone(started + grace_s)
        killed = False
        if not graceful:
            killed = True
            self._signal_group(signal.SIGKILL)
            self._wait_group_gone(clock.monotonic() + kill_wait_s)
        clock.wait(self.exited, kill_wait_s)
        for reader in self._readers:  # the group is gone: the pipe is closed, drain what is left
            reader.join(timeout=1.0)
        self._finish()
        leftovers = tuple(self.group_members())
        return StopReport(graceful, killed, leftovers, clock.monotonic() - started)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
            os.killpg(self._proc.pid, sig)

    def _wait_group_gone(self, deadline: float) -> bool:
        while self.clock.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is None:
                self.clock.wait(self.exited, GONE_POLL_S)
                continue
            if not self.group_members():
                return True
            self.clock.sleep(GONE_POLL_S)
        return not self.group_members() and (self._proc is None or self._proc.poll() is not None)
