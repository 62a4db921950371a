"""One model per GPU set (launcher/host/gpu_locks.py): real flocks on real lock files, held by this
process or by a child it starts: all or none are taken, a refusal names each holder, a holder that
dies leaves no stale lock, and a record that is corrupt still yields the kernel's pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.errors import PreflightRefused
from launcher.host.gpu_locks import (
    GpuLocks,
    LoadLocks,
    LockHolder,
    busy_holders,
    load_lock_path,
    lock_path,
    read_holder,
)
from launcher.host.request import HostRequest
from tests.doubles import FakeClock
from tests.simserver import HANG_S

# A child that takes the locks of the GPUs it is given, says so, and holds them until stdin closes.
HOLDER = """
import sys
from pathlib import Path
from launcher.host.gpu_locks import GpuLocks, LoadLocks
kind = LoadLocks if sys.argv[1] == "load" else GpuLocks
with kind(Path(sys.argv[2]), sys.argv[4:], sys.argv[3]):
    print("held", flush=True)
    sys.stdin.read()
"""


class Holder:
    """Another launcher: a real process holding real locks."""

    def __init__(self, state: Path, profile: str, *gpus: str, kind: str = "gpu") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, kind, str(state), profile, *gpus],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "held\n"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def end(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(HANG_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Holder]:
    holder = Holder(tmp_path, "staging", "1")
    try:
        yield holder
    finally:
        holder.end()


def test_the_locks_are_held_for_the_block_and_record_who_holds_them(tmp_path: Path) -> None:
    with GpuLocks(tmp_path, ["0", "1"], "prod") as locks:
        assert locks.held
        record = json.loads(lock_path(tmp_path, "0").read_text())
        assert (record["pid"], record["profile"]) == (os.getpid(), "prod") and record["since"]
        holder = read_holder(tmp_path, "1")
        assert (holder.gpu, holder.pid, holder.profile) == ("1", os.getpid(), "prod")
        assert busy_holders(tmp_path, ["0", "1"]) == [], "our own locks are not someone else's"
    assert not locks.held
    assert lock_path(tmp_path, "0").read_text() == "", "the record goes with the lock"


def test_a_lock_file_name_is_safe_whatever_the_gpu_is_called(tmp_path: Path) -> None:
    path = lock_path(tmp_path, "GPU-1a2b/../x")
    assert path.parent == tmp_path / "locks" and path.name == "gpu-GPU-1a2b____x.lock"


def test_a_server_that_uses_no_gpu_takes_no_lock(tmp_path: Path) -> None:
    request = HostRequest.of_launch(
        "demo", ["vllm-sim", "serve", "m"], {}, {}, host="127.0.0.1", port=8000, fingerprint="f",
        has_secret_env=False,
    )  # fmt: skip
    locks = GpuLocks.for_request(request, tmp_path, environ={})
    assert locks.gpus == () and locks.held
    with locks:
        assert not (tmp_path / "locks").exists()


def test_a_request_locks_the_gpus_vllm_will_use(tmp_path: Path) -> None:
    request = HostRequest.of_launch(
        "big", ["vllm", "serve", "m"], {"CUDA_VISIBLE_DEVICES": "2,3"}, {"args": {"tensor_parallel_size": 2}},
        host="127.0.0.1", port=8000, fingerprint="f", has_secret_env=False,
    )  # fmt: skip
    assert GpuLocks.for_request(request, tmp_path, environ={}).gpus == ("2", "3")


def test_another_launchers_gpu_refuses_the_whole_set_naming_it(tmp_path: Path, other: Holder) -> None:
    locks = GpuLocks(tmp_path, ["0", "1"], "prod")
    with pytest.raises(PreflightRefused) as refused:
        locks.acquire()
    assert str(refused.value).startswith(
        f"one model per GPU set: GPU 1 is locked by profile 'staging', launcher pid {other.pid} since "
    )
    assert refused.value.hint is not None and "one model per GPU" in refused.value.hint
    assert not locks.held
    with GpuLocks(tmp_path, ["0"], "solo"):
        pass  # GPU 0 was given back: all or none


def test_a_probe_sees_the_other_holder_and_leaves_the_lock_where_it_was(
    tmp_path: Path, other: Holder
) -> None:
    busy = busy_holders(tmp_path, ["0", "1", "7"])
    assert [(h.gpu, h.pid, h.profile) for h in busy] == [("1", other.pid, "staging")]
    assert not lock_path(tmp_path, "7").exists(), "a probe creates no lock file"
    with pytest.raises(PreflightRefused):
        GpuLocks(tmp_path, ["1"], "prod").acquire()


def test_a_holder_that_dies_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = Holder(tmp_path, "staging", "0")
    holder.proc.kill()
    holder.proc.wait(HANG_S)
    holder.end()
    assert busy_holders(tmp_path, ["0"]) == []
    with GpuLocks(tmp_path, ["0"], "prod"):
        assert read_holder(tmp_path, "0").profile == "prod"


def test_a_corrupt_record_still_names_the_holders_pid_from_the_kernel(tmp_path: Path, other: Holder) -> None:
    lock_path(tmp_path, "1").write_text("\x00garbage{")
    holder = read_holder(tmp_path, "1")
    assert (holder.pid, holder.profile, holder.since) == (other.pid, None, None)
    lock_path(tmp_path, "1").write_text('["a list, not a record"]')
    assert read_holder(tmp_path, "1").pid == other.pid


def test_a_holder_is_described_with_what_is_known() -> None:
    assert LockHolder("0", 12, "prod", "2026-12-01 10:00:00 UTC").describe() == (
        "GPU 0 is locked by profile 'prod', launcher pid 12 since 2026-12-01 10:00:00 UTC"
    )
    assert LockHolder("3", None, None, None).describe() == "GPU 3 is locked by a process whose pid is unknown"


def test_a_lock_nobody_holds_reads_as_an_empty_record(tmp_path: Path) -> None:
    lock_path(tmp_path, "0").parent.mkdir(parents=True)
    lock_path(tmp_path, "0").write_text("")
    assert read_holder(tmp_path, "0") == LockHolder("0", None, None, None)


class LoadEndsAtFirstWait(FakeClock):
    """The other engine's load ends (its launcher lets go) while this start waits the first time."""

    def __init__(self, other: Holder) -> None:
        super().__init__()
        self.other = other

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self.other.end()


def test_a_start_waits_while_another_engine_loads_on_its_gpus_and_goes_once_that_load_ended(
    tmp_path: Path,
) -> None:
    loading = Holder(tmp_path, "staging", "1", kind="load")
    said: list[str] = []
    clock = LoadEndsAtFirstWait(loading)
    try:
        with LoadLocks(tmp_path, ["0", "1"], "prod", clock=clock, said=said.append):
            assert json.loads(load_lock_path(tmp_path, "1").read_text())["profile"] == "prod"
    finally:
        loading.end()
    assert len(said) == 1
    assert said[0].startswith(
        f"waiting: GPU 1 is loading for profile 'staging', launcher pid {loading.pid} since"
    )
    assert clock.slept  # it waited: the load lock was taken only after the other let go
    assert load_lock_path(tmp_path, "0").read_text() == ""  # let go after the block: an empty record


def test_a_load_that_never_ends_refuses_the_waiting_start_naming_who_loads(tmp_path: Path) -> None:
    loading = Holder(tmp_path, "staging", "0", kind="load")
    try:
        with pytest.raises(PreflightRefused, match=f"still loading .* launcher pid {loading.pid}"):
            LoadLocks(tmp_path, ["0"], "prod", clock=FakeClock(), wait_s=60).acquire()
        gpu = GpuLocks(tmp_path, ["0"], "prod")  # a load lock is not the GPU lock: one model per set
        with gpu:
            assert gpu.held
    finally:
        loading.end()
