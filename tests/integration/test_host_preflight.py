"""Preflight refusals against real processes: orphans titled like vLLM's, deaf to SIGTERM, on a port,
holding a GPU lock. Only GPU memory is faked (FakeGpuProbe), and it names real pids."""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from launcher.errors import BadInput, PreflightRefused
from launcher.host.gpu import FakeGpuProbe, NvmlProbe
from launcher.host.gpu_locks import GpuLocks
from launcher.host.preflight import check_host, run_preflight
from launcher.host.reaper import ReapOutcome
from launcher.host.report import CheckName, CheckStatus, PreflightReport
from launcher.host.request import HostRequest
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions
from tests.simserver import free_port
from tests.titled_procs import CHILD, Spawner, alive

pytestmark = pytest.mark.integration
ME = psutil.Process().username()
PYTHON = Path(sys.executable).name  # how a child's command line starts: `python train.py`


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(tmp_path)
    try:
        yield spawner
    finally:
        spawner.close()


def make_request(profiles_dir: Path, preflight: str = "", env: str = "", args: str = "") -> HostRequest:
    """A vLLM profile on a free port; its own process-title prefix keeps other tests' orphans out."""
    prefix = f"VLLMtest{uuid.uuid4().hex[:8]}"
    (profiles_dir / "p.toml").write_text(
        f'[engine]\nmodel = "org/tiny"\nport = {free_port()}\n'
        f"[args]\n{args}\n"
        f'[env]\nVLLM_PROCESS_NAME_PREFIX = "{prefix}"\n{env}\n'
        f"[preflight]\nreap_grace_s = 0.3\nreap_deadline_s = 5.0\n{preflight}\n"
    )
    plan = build_plan(profiles_dir, "p")
    assert not plan.errors, plan.errors
    return HostRequest.from_plan(plan)


def options(tmp_path: Path) -> GlobalOptions:
    return GlobalOptions(profiles_dir=tmp_path / "profiles", state_dir=tmp_path / "state")


def status(report: PreflightReport, name: CheckName) -> CheckStatus:
    return report.check(name).status


def test_free_memory_refusal_names_each_holder_with_its_size(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    (tmp_path / "train.py").write_text(CHILD)
    worker = spawn.orphan("VLLM::Worker_TP0")
    trainer = spawn.child(script="train.py")
    probe = FakeGpuProbe(total_mib=(32768,))
    probe.hold(0, worker.pid, 29696)  # 29.0 GiB
    probe.hold(0, trainer.pid, 1229)  # 1.2 GiB
    request = make_request(profiles_dir)  # default gpu_memory_utilization 0.92 of 32 GiB = 29.44 GiB

    with pytest.raises(PreflightRefused) as refused:
        run_preflight(request, options(tmp_path), probe=probe)

    expected = (
        "GPU 0: free 1.80 GiB − 0.59 GiB CUDA context < needed 29.44 GiB; "
        f"held by pid {worker.pid} VLLM::Worker_TP0 "
        f"(orphan: its parent is gone, 29.0 GiB), pid {trainer.pid} {PYTHON} train.py (user {ME}, 1.2 GiB)"
    )
    assert expected in refused.value.message
    assert refused.value.exit_code == 4
    assert "--reap-orphans" in (refused.value.hint or "")
    assert alive(worker.pid) and trainer.poll() is None, "a plain preflight signals nothing"


def test_orphan_deaf_to_sigterm_is_reaped_with_sigkill_and_its_memory_comes_back(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    deaf = spawn.orphan("VLLM::Worker_TP0", ignore_term=True)
    polite = spawn.orphan("VLLM::Worker_TP1")
    probe = FakeGpuProbe(total_mib=(32768, 32768))
    probe.hold(0, deaf.pid, 29696)
    probe.hold(1, polite.pid, 29696)
    request = make_request(profiles_dir, args="tensor_parallel_size = 2")

    before = check_host(request, options(tmp_path), probe=probe)
    assert status(before, CheckName.ORPHANS) is CheckStatus.REFUSED
    assert (
        f"pid {deaf.pid} VLLM::Worker_TP0 (orphan: its parent is gone, 29.0 GiB on GPU 0)" in before.reason()
    )

    report = check_host(request, options(tmp_path), reap=True, probe=probe)

    assert report.reap is not None
    outcomes = {r.pid: r.outcome for r in report.reap.processes}
    assert outcomes == {deaf.pid: ReapOutcome.KILLED, polite.pid: ReapOutcome.TERMINATED}
    assert report.reap.gpu_released is True
    assert report.reap.free_bytes_after[0] > report.reap.free_bytes_before[0]
    assert not alive(deaf.pid) and not alive(polite.pid)
    assert not report.refused, report.render_text()
    assert (
        "free 32.00 GiB − 0.59 GiB CUDA context >= needed 29.44 GiB"
        in report.check(CheckName.GPU_MEMORY).detail
    )


def test_a_process_that_is_not_vllm_is_touched_only_with_force(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    bystander = spawn.child()
    probe = FakeGpuProbe(total_mib=(32768,))
    probe.hold(0, bystander.pid, 8192)
    request = make_request(profiles_dir)

    report = check_host(request, options(tmp_path), reap=True, probe=probe)
    assert bystander.poll() is None, "reaping orphans must not touch a process that is not vLLM's"
    assert report.reap is None
    assert f"pid {bystander.pid} {PYTHON} -c" in report.check(CheckName.GPU_MEMORY).detail

    with pytest.raises(BadInput, match="--force and --reap-foreign only widen --reap-orphans"):
        check_host(request, options(tmp_path), force=True, probe=probe)

    forced = check_host(request, options(tmp_path), reap=True, force=True, probe=probe)
    assert forced.reap is not None
    # ended: by SIGTERM, or by SIGKILL after the grace when a loaded host (or coverage saving its data
    # on SIGTERM) kept it past the grace; which signal it took is the reaper's business, not this rule's
    (reaped,) = forced.reap.processes
    assert reaped.pid == bystander.pid and reaped.outcome in (ReapOutcome.TERMINATED, ReapOutcome.KILLED)
    assert bystander.wait(timeout=5) != 0
    assert not forced.refused, forced.render_text()


def test_a_live_model_on_the_same_gpu_is_refused_however_much_memory_is_free(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    engine = spawn.child("VLLM::EngineCore")  # a live parent (this test) owns it: not an orphan
    probe = FakeGpuProbe(total_mib=(143771,))
    probe.hold(0, engine.pid, 1024)
    request = make_request(profiles_dir, args="gpu_memory_utilization = 0.3")

    report = check_host(request, options(tmp_path), reap=True, probe=probe)

    one_model = report.check(CheckName.ONE_MODEL)
    assert one_model.status is CheckStatus.REFUSED
    assert (
        f"GPU 0 already serves a model: pid {engine.pid} VLLM::EngineCore (model under pid {os.getpid()}"
        in one_model.detail
    )
    assert one_model.hint is not None and f"pid {os.getpid()} was not started by vllm-gate" in one_model.hint
    assert status(report, CheckName.GPU_MEMORY) is CheckStatus.OK
    orphans = report.check(CheckName.ORPHANS)  # another deployment's orphan may warn: this host is shared
    assert orphans.status is not CheckStatus.REFUSED
    assert engine.pid not in orphans.data["orphans"] + orphans.data["foreign_orphans"]
    assert engine.poll() is None, "a live server is never reaped as an orphan"


def test_gpu_lock_held_by_another_launcher_is_refused_naming_its_pid(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    state = tmp_path / "state"
    holder = spawn.child(locks=f"{state}|prod|0,1")
    request = make_request(profiles_dir, args="tensor_parallel_size = 2")

    report = check_host(request, options(tmp_path), probe=FakeGpuProbe(total_mib=(32768, 32768)))
    detail = report.check(CheckName.ONE_MODEL).detail
    assert f"GPU 0 is locked by profile 'prod', launcher pid {holder.pid}" in detail
    assert f"GPU 1 is locked by profile 'prod', launcher pid {holder.pid}" in detail

    with (
        pytest.raises(PreflightRefused, match=f"launcher pid {holder.pid}"),
        GpuLocks(state, ["1", "2"], "p"),
    ):
        pass
    assert not (state / "locks" / "gpu-2.lock").read_text(), "all or nothing: GPU 2 was not kept"

    holder.kill()
    holder.wait(timeout=5)  # the kernel drops a dead holder's flock: no stale lock
    with GpuLocks.for_request(request, state, environ={}) as locks:
        assert locks.held and locks.gpus == ("0", "1")
        mine = check_host(request, options(tmp_path), probe=FakeGpuProbe(total_mib=(32768, 32768)))
        assert status(mine, CheckName.ONE_MODEL) is CheckStatus.OK, "our own locks do not refuse us"


def test_port_in_use_is_refused_naming_the_listener(
    profiles_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    request = make_request(profiles_dir)
    listener = spawn.child(port=request.port)

    report = check_host(request, options(tmp_path), probe=FakeGpuProbe())

    assert report.check(CheckName.PORT).detail.startswith(
        f"port: 127.0.0.1:{request.port} is in use by pid {listener.pid} "
    )
    assert [c.name for c in report.checks if c.status is CheckStatus.REFUSED] == [CheckName.PORT]


def test_host_ram_below_the_threshold_is_refused(profiles_dir: Path, tmp_path: Path) -> None:
    request = make_request(profiles_dir, preflight="min_host_available_gib = 100000")
    report = check_host(request, options(tmp_path), probe=FakeGpuProbe())
    detail = report.check(CheckName.HOST_MEMORY).detail
    assert re.fullmatch(
        r"host RAM: [\d.]+ GiB available < 100000 GiB required \(preflight\.min_host_available_gib\)", detail
    )
    assert status(report, CheckName.SWAP) is CheckStatus.SKIPPED


def test_without_nvml_gpu_checks_are_skipped_with_the_reason(profiles_dir: Path, tmp_path: Path) -> None:
    request = make_request(profiles_dir)
    report = check_host(
        request, options(tmp_path), probe=FakeGpuProbe(reason="no NVML: NVML Shared Library Not Found")
    )
    gpu = report.check(CheckName.GPU_MEMORY)
    assert (gpu.status, gpu.detail) == (CheckStatus.SKIPPED, "no NVML: NVML Shared Library Not Found")
    assert "NVML part skipped: no NVML" in report.check(CheckName.ONE_MODEL).detail
    assert not report.refused, report.render_text()


def test_the_real_probe_reports_a_skip_where_there_is_no_driver() -> None:
    with NvmlProbe() as probe:
        reason = probe.skip_reason()
        if reason is None:
            pytest.skip("this machine has NVML: see tests/gpu")
    assert reason.startswith("no NVML: ")


def test_memory_held_by_processes_out_of_sight_and_a_missing_gpu_are_refused(
    profiles_dir: Path, tmp_path: Path
) -> None:
    probe = FakeGpuProbe(total_mib=(32768,), free_mib=[1024])  # held in another container, say
    request = make_request(profiles_dir, env='CUDA_VISIBLE_DEVICES = "0,3"', args="tensor_parallel_size = 2")
    detail = check_host(request, options(tmp_path), probe=probe).check(CheckName.GPU_MEMORY).detail
    assert detail == (
        "GPU 0: free 1.00 GiB − 0.59 GiB CUDA context < needed 29.44 GiB; "
        "no process visible from here holds it; "
        "GPU 3 does not exist (this host has GPUs 0)"
    )
