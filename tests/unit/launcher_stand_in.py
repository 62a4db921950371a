"""A stand-in for a running launcher, for `set --apply` and `rollback` tests: a real process that
holds the real profile lock (launcher.json) and writes the real status board, and answers SIGHUP
the way the launcher does — take the reload requests, re-render the profile, gate it, answer each
request with its verdict.

Its "gates": max_num_seqs <= 16 passes (serving), 13 fails outright (failed, exit 1), anything
else is rejected (serving_last_good). Every reload appends the argv it rendered to reloads.jsonl.

    python launcher_stand_in.py STATE_DIR PROFILES_DIR PROFILE
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from launcher.profile.plan import build_plan
from launcher.state.store import StateStore
from launcher.supervisor import reload_requests
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.status import Phase, StatusBoard

IDLE_EXIT_S = 60  # never outlive a test run that forgot it


def main(state_dir: Path, profiles_dir: Path, profile: str) -> int:
    profile_dir = state_dir / "profiles" / profile
    wanted = {signal.SIGHUP, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    with ProfileLock(StateStore(state_dir), profile):
        board = StatusBoard(profile_dir / "status.json", profile)
        board.update(phase=Phase.SERVING, serving_profile=profile)
        print("ready", flush=True)
        while True:
            received = signal.sigtimedwait(wanted, IDLE_EXIT_S)
            if received is None or received.si_signo == signal.SIGTERM:
                board.update(phase=Phase.STOPPED)
                return 0
            code = reload(board, profiles_dir, profile, profile_dir / "reloads.jsonl")
            if code is not None:
                return code


def reload(board: StatusBoard, profiles_dir: Path, profile: str, record: Path) -> int | None:
    reloads = record.parent / "reloads"
    ids = reload_requests.take(reloads)
    code = _gate(board, profiles_dir, profile, record)
    verdict = {Phase.SERVING: 0, Phase.SERVING_LAST_GOOD: 3}.get(Phase(board.current.phase), 1)
    verdict_ = reload_requests.Verdict.implied(verdict, str(board.current.detail))
    reload_requests.answer(reloads, ids, verdict_)
    return code


def _gate(board: StatusBoard, profiles_dir: Path, profile: str, record: Path) -> int | None:
    seq = board.current.reload_seq + 1
    plan = build_plan(profiles_dir, profile)
    with record.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"seq": seq, "argv": list(plan.argv)}) + "\n")
    board.update(phase=Phase.GATING)  # a verdict must not be read from this intermediate phase
    seqs = int(plan.args.get("max_num_seqs", 0))
    if seqs == 13:
        board.update(phase=Phase.FAILED, reload_seq=seq, detail="stand-in: candidate and last-good failed")
        return 1
    phase = Phase.SERVING if seqs <= 16 else Phase.SERVING_LAST_GOOD
    board.update(phase=phase, reload_seq=seq, detail=f"stand-in: max_num_seqs={seqs}")
    return None


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
