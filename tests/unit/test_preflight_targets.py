"""Whom preflight may signal (launcher/host/preflight.py, gpu_checks.read_gpus): the orphans that
block this start, with --force every process on its GPUs, and another deployment's orphan only when
the operator names it; never this launcher or its parents. Hand-built host views and FakeGpuProbe,
the one GPU seam; nothing is signalled here."""

from __future__ import annotations

import os

import pytest

from launcher.errors import BadInput
from launcher.host.gpu import GIB, FakeGpuProbe
from launcher.host.gpu_checks import Holder, HostGpus, TargetGpu, read_gpus
from launcher.host.orphans import HostProcess, Role
from launcher.host.policy import GpuDemand
from launcher.host.preflight import _reap_targets, named_targets, own_marked_orphans
from launcher.host.process_view import ProcessView

BASE = 4_000_000  # far above any pid_max: these pids belong to nobody


def view(pid: int, *cmdline: str) -> ProcessView:
    return ProcessView(pid, 1, "python3", cmdline or ("VLLM::Worker_TP0",), "alice", 1000, 1000.0)


def orphan(pid: int, deployment: str | None) -> HostProcess:
    return HostProcess(view(pid), Role.ORPHAN, "VLLM::Worker_TP0", None, deployment)


OURS = orphan(BASE + 1, "prod@/state")
FOREIGN = orphan(BASE + 2, "staging@/other")
UNMARKED = orphan(BASE + 3, None)
SERVER = HostProcess(view(BASE + 4, "vllm", "serve", "m"), Role.SERVER, None, None, "prod@/state")
TRAINER = HostProcess(view(BASE + 5, "python3", "train.py"), Role.OTHER, None, None)
SCAN = [OURS, FOREIGN, UNMARKED, SERVER]


def gpus(*holders: Holder) -> HostGpus:
    device = FakeGpuProbe(total_mib=(81920,)).devices()[0]
    return HostGpus((TargetGpu("0", device, holders),), (0,), None)


def test_only_this_deployments_orphans_are_reaped_without_force() -> None:
    chosen = _reap_targets(SCAN, gpus(), "VLLM", "prod@/state", force=False)
    assert [v.pid for v in chosen] == [OURS.pid]


def test_a_start_ends_only_the_orphans_that_carry_this_deployments_mark() -> None:
    """What every start reaps unasked (issue 42): a dead launcher's own leftovers, proven by the mark;
    never another deployment's, an unmarked one (even on our GPUs, even with our prefix), a live server."""
    on_ours = [*SCAN, HostProcess(view(BASE + 6, "PROD::Worker_TP0"), Role.ORPHAN, "PROD::Worker_TP0", None)]
    assert [v.pid for v in own_marked_orphans(on_ours, "prod@/state")] == [OURS.pid]
    assert own_marked_orphans(SCAN, "other@/state") == []
    me = orphan(os.getpid(), "prod@/state")  # never this launcher, whatever it looks like
    assert own_marked_orphans([me], "prod@/state") == []


def test_an_orphan_of_anyone_on_our_gpus_blocks_and_is_reaped() -> None:
    on_ours = gpus(Holder(FOREIGN.pid, 20 * GIB, FOREIGN))
    chosen = _reap_targets(SCAN, on_ours, "VLLM", "prod@/state", force=False)
    assert [v.pid for v in chosen] == [OURS.pid, FOREIGN.pid]


def test_force_widens_the_reap_to_every_process_on_our_gpus_but_not_to_one_it_cannot_see() -> None:
    held = gpus(Holder(TRAINER.pid, 30 * GIB, TRAINER), Holder(BASE + 9, 2 * GIB, None))
    assert [v.pid for v in _reap_targets(SCAN, held, "VLLM", "prod@/state", force=False)] == [OURS.pid]
    forced = _reap_targets(SCAN, held, "VLLM", "prod@/state", force=True)
    assert [v.pid for v in forced] == [OURS.pid, TRAINER.pid]


def test_this_launcher_and_its_parents_are_never_chosen() -> None:
    me = HostProcess(view(os.getpid()), Role.ORPHAN, "VLLM::Worker_TP0", None, "prod@/state")
    parent = HostProcess(view(os.getppid(), "bash"), Role.OTHER, None, None)
    held = gpus(Holder(parent.pid, GIB, parent))
    assert _reap_targets([me, OURS], held, "VLLM", "prod@/state", force=True) == [OURS.view]


def test_an_operator_names_a_foreign_orphan_by_pid_deployment_or_profile() -> None:
    assert named_targets(SCAN, (str(FOREIGN.pid),), set()) == [FOREIGN.view]
    assert named_targets(SCAN, ("staging@/other",), set()) == [FOREIGN.view]
    assert named_targets(SCAN, ("staging",), set()) == [FOREIGN.view]


def test_a_name_already_chosen_is_not_signalled_twice() -> None:
    chosen = {OURS.pid}
    assert named_targets(SCAN, ("prod", str(FOREIGN.pid), "staging"), chosen) == [FOREIGN.view]
    assert chosen == {OURS.pid, FOREIGN.pid}


@pytest.mark.parametrize("name", ["999", "nobody", "vllm", str(BASE + 4), ""])
def test_a_name_that_matches_no_orphan_signals_nothing(name: str) -> None:
    with pytest.raises(BadInput, match=f"--reap-foreign {name}: no vLLM orphan has that pid or deployment"):
        named_targets(SCAN, (name,), set())


def test_an_orphan_without_a_mark_is_never_matched_by_an_empty_deployment() -> None:
    assert named_targets([UNMARKED], (str(UNMARKED.pid),), set()) == [UNMARKED.view]
    with pytest.raises(BadInput):
        named_targets([UNMARKED], ("",), set())


def test_the_gpus_read_name_each_holder_and_the_devices_that_exist() -> None:
    probe = FakeGpuProbe(total_mib=(81920, 81920))
    probe.hold(1, os.getpid(), 30000)
    probe.hold(1, os.getppid(), None)  # the driver does not say how much (some containers, MIG)
    probe.hold(1, BASE + 7, 5000)  # a process that has ended: its memory is back, it holds nothing
    demand = GpuDemand(("1", "GPU-fake-0000", "7"), "test", 0.9)
    found = read_gpus(probe, demand, ("VLLM",))
    assert found.indexes == (0, 1) and found.skip_reason is None
    one, by_uuid, missing = found.targets
    assert one.device is not None and one.device.free_bytes == (81920 - 30000) << 20
    held = {h.pid: h.used_bytes for h in one.holders}
    assert held == {os.getpid(): 30000 << 20, os.getppid(): None}
    assert all(h.process is not None and h.process.role is Role.OTHER for h in one.holders)
    assert by_uuid.device is not None and by_uuid.device.index == 0 and by_uuid.holders == ()
    assert missing.device is None and missing.holders == ()


def test_a_probe_that_cannot_read_gpus_says_why() -> None:
    found = read_gpus(
        FakeGpuProbe(reason="no NVML: Driver Not Loaded"), GpuDemand(("0",), "t", 0.9), ("VLLM",)
    )
    assert (found.targets, found.indexes, found.skip_reason) == ((), (), "no NVML: Driver Not Loaded")
