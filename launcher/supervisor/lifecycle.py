"""One attempt's life on the box, the same for `launch` (serve), `launch try` and `launch probe`'s
arms: take the candidate's GPU locks, start it, and either release the locks at once (the start
failed) or hand them to the attempt, which lets go of them only once its whole process group is
gone (`Attempt.stop`). One model per GPU set holds for every engine any of the three starts.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from launcher.supervisor.attempt import start_attempt
from launcher.supervisor.candidate import Candidate
from launcher.supervisor.engine import EngineProcess
from launcher.supervisor.progress import Progress
from launcher.supervisor.seams import Attempt, EngineFactory, GpuLocksFn


def launch_attempt(
    candidate: Candidate,
    log_path: Path,
    progress: Progress,
    *,
    gpu_locks: GpuLocksFn | None,
    deployment: str | None = None,
    engine_factory: EngineFactory = EngineProcess,
    sharing: Candidate | None = None,
) -> Attempt:
    """Start `candidate` holding its GPU locks; a start that raises releases them before it returns.

    `gpu_locks` is `Hooks.gpu_locks` (None where the host layer is not wired: no locks to take);
    `deployment` marks the engine's processes as this deployment's (launcher/host/orphans.py);
    `engine_factory` is the engine seam (seams.py), the real process group by default;
    `sharing`: a parked engine whose locks cover these GPUs (supervisor/park.py)."""
    with ExitStack() as locks:
        if gpu_locks is not None:
            held = gpu_locks(candidate, sharing=sharing) if sharing is not None else gpu_locks(candidate)
            locks.enter_context(held)  # before the start: two models never share a GPU
        attempt = start_attempt(
            candidate, log_path, progress, deployment=deployment, engine_factory=engine_factory
        )
        attempt.held.enter_context(locks.pop_all())  # the engine's now: released after its group is gone
    return attempt
