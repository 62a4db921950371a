"""group_members: the live processes of one group — a zombie is not a member (its group is
empty to killpg's purpose), another group's process never is, and both are read per process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from launcher.procgroup import group_members
from tests.scripted_http import HANG_S


def test_live_members_are_found_and_a_zombie_is_not() -> None:
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    quick = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        quick_pid = quick.pid  # not reaped until the end: a zombie once it has exited
        deadline = time.monotonic() + HANG_S
        while psutil.Process(quick_pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert group_members(leader.pid) == [leader.pid]
        assert group_members(quick_pid) == []  # exited, not reaped: no member
        assert os.getpid() not in group_members(leader.pid)
    finally:
        leader.kill()
        leader.wait()
        quick.wait()
