"""Host safety on a real GPU: NVML sees a real orphan's CUDA memory, preflight names it, reaping gives
it back. Skipped cleanly without NVML, a GPU or torch (`pytest -m gpu` on the GPU machine)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.host.gpu import MIB, NvmlProbe
from launcher.host.preflight import check_host
from launcher.host.reaper import ReapOutcome
from launcher.host.report import CheckName, CheckStatus
from launcher.host.request import HostRequest
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions
from tests.titled_procs import Spawner, alive

pytestmark = pytest.mark.gpu
HOLD_MIB = 2048


def _nvml_reason() -> str | None:
    with NvmlProbe() as probe:
        reason = probe.skip_reason()
        if reason is None and not probe.devices():
            reason = "NVML sees no GPU"
    return reason


@pytest.fixture(scope="module", autouse=True)
def real_gpu() -> None:
    reason = _nvml_reason()
    if reason is not None:
        pytest.skip(reason)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(tmp_path)
    try:
        yield spawner
    finally:
        spawner.close()


def test_nvml_reports_devices_with_consistent_memory() -> None:
    with NvmlProbe() as probe:
        devices = probe.devices()
    assert devices and all(0 <= d.free_bytes <= d.total_bytes for d in devices)
    assert all(d.uuid.startswith("GPU-") for d in devices)


def test_nvml_reports_each_power_limit_within_its_range() -> None:
    """Read only: setting a limit needs root and changes the card for everyone on it."""
    with NvmlProbe() as probe:
        limits = [probe.power_limit(d.index) for d in probe.devices()]
    reported = [limit for limit in limits if limit is not None]
    if not reported:
        pytest.skip("no GPU here reports a power limit")
    for limit in reported:
        assert 0 < limit.min_w <= limit.current_w <= limit.max_w, limit
        assert limit.min_w <= limit.default_w <= limit.max_w, limit


def test_a_real_orphan_is_named_with_its_memory_and_reaped_until_the_memory_is_back(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    orphan = spawn.orphan("VLLM::Worker_TP0", ignore_term=True, gpu_mib=HOLD_MIB)
    with NvmlProbe() as probe:
        held = {p.pid: p.used_bytes for p in probe.processes(0)}
    if orphan.pid not in held:
        pytest.skip(f"NVML lists pids {sorted(held)}, not {orphan.pid}: another pid namespace")
    assert (held[orphan.pid] or 0) >= HOLD_MIB * MIB
    (profiles_dir / "g.toml").write_text(
        '[engine]\nmodel = "org/tiny"\nport = 18765\n'
        f'[env]\nCUDA_VISIBLE_DEVICES = "0"\nVLLM_PROCESS_NAME_PREFIX = "VLLMgpu{uuid.uuid4().hex[:6]}"\n'
        "[args]\ngpu_memory_utilization = 0.05\n[preflight]\nreap_grace_s = 1\nreap_deadline_s = 30\n"
    )
    plan = build_plan(profiles_dir, "g")
    options = GlobalOptions(profiles_dir=profiles_dir, state_dir=tmp_path / "state")

    with NvmlProbe() as probe:
        before = check_host(HostRequest.from_plan(plan), options, probe=probe)
    orphans = before.check(CheckName.ORPHANS)
    assert orphans.status is CheckStatus.REFUSED
    assert f"pid {orphan.pid} VLLM::Worker_TP0 (orphan: its parent is gone, " in orphans.detail
    assert "GiB on GPU 0)" in orphans.detail

    with NvmlProbe() as probe:
        after = check_host(HostRequest.from_plan(plan), options, reap=True, probe=probe)
    assert after.reap is not None
    assert [(r.pid, r.outcome) for r in after.reap.processes] == [(orphan.pid, ReapOutcome.KILLED)]
    assert after.reap.gpu_released is True
    gained = after.reap.free_bytes_after[0] - after.reap.free_bytes_before[0]
    assert gained >= HOLD_MIB * MIB * 0.9, gained
    assert not alive(orphan.pid)
    assert after.check(CheckName.ORPHANS).status is CheckStatus.OK
