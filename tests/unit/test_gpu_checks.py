"""Preflight's GPU decisions (launcher/host/gpu_checks.py, orphans.py) on hand-built host views:
who holds which GPU, whose orphan a process is, and which of them refuse a start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from launcher.host.gpu import GIB, MIB, GpuDevice
from launcher.host.gpu_checks import (
    REAP_HINT,
    Holder,
    HostGpus,
    TargetGpu,
    check_gpu_memory,
    check_one_model,
    check_orphans,
    relevant_orphans,
    without_holders,
    without_serving,
)
from launcher.host.gpu_locks import LockHolder
from launcher.host.orphans import (
    INIT_NAMES,
    HostProcess,
    Role,
    classify,
    deployment_id,
    mark_env,
    prefixes_for,
)
from launcher.host.policy import GpuDemand
from launcher.host.process_view import ProcessView, is_api_server, vllm_title
from launcher.host.report import CheckName, CheckStatus

# Pids far above any pid_max a test host uses: environment reads of them find no process.
NO_SUCH_PID = 4_000_000
ME = "alice"


def view(
    pid: int, cmdline: tuple[str, ...], ppid: int = 1, user: str = ME, name: str = "python3"
) -> ProcessView:
    return ProcessView(pid, ppid, name, cmdline, user, 1000, create_time=1000.0)


def process(pid: int, role: Role, title: str = "VLLM::Worker_TP0", deployment: str | None = None,
            user: str = ME, root: ProcessView | None = None) -> HostProcess:  # fmt: skip
    return HostProcess(view(NO_SUCH_PID + pid, (title,), user=user), role, title, root, deployment)


def not_vllm(pid: int, user: str = ME) -> HostProcess:
    return HostProcess(view(NO_SUCH_PID + pid, ("python", "train.py"), user=user), Role.OTHER, None, None)


def gpu(index: int, free_gib: float, total_gib: float = 80.0) -> GpuDevice:
    total, free = int(total_gib * GIB), int(free_gib * GIB)
    return GpuDevice(index, f"GPU-{index:04d}", "H100", total, total - free, free)


def host(*targets: TargetGpu, indexes: tuple[int, ...] = (0, 1)) -> HostGpus:
    return HostGpus(targets, indexes, None)


def demand(*ids: str, utilization: float = 0.9) -> GpuDemand:
    return GpuDemand(ids, "test", utilization)


def test_enough_free_memory_on_every_gpu_is_ok_with_the_figures() -> None:
    gpus = host(TargetGpu("0", gpu(0, 79.0), ()), TargetGpu("1", gpu(1, 75.0), ()))
    result = check_gpu_memory(gpus, demand("0", "1"), ME)
    assert result.status is CheckStatus.OK
    assert (
        result.detail
        == "GPU 0: free 79.00 GiB >= needed 72.00 GiB; GPU 1: free 75.00 GiB >= needed 72.00 GiB"
    )
    assert result.data["gpus"][0] == {"gpu": "0", "free_mib": 79 * 1024, "needed_mib": int(0.9 * 80 * 1024),
                                      "cuda_context_mib": 0}  # fmt: skip


def test_a_short_gpu_names_who_holds_its_memory_and_the_others_pass_silently() -> None:
    trainer = HostProcess(view(NO_SUCH_PID + 7, ("python", "train.py"), user="bob"), Role.OTHER, None, None)
    held = (Holder(trainer.pid, 40 * GIB, trainer), Holder(NO_SUCH_PID + 8, 2 * GIB, None))
    gpus = host(TargetGpu("0", gpu(0, 79.0), ()), TargetGpu("1", gpu(1, 38.0), held))
    result = check_gpu_memory(gpus, demand("0", "1"), ME)
    assert result.status is CheckStatus.REFUSED
    assert result.detail == (
        f"GPU 1: free 38.00 GiB < needed 72.00 GiB; held by pid {NO_SUCH_PID + 7} python train.py "
        f"(user bob, 40.0 GiB), pid {NO_SUCH_PID + 8} (not visible from here, 2.0 GiB)"
    )
    assert result.hint is not None and "gpu_memory_utilization 0.9" in result.hint


def test_memory_this_launchers_own_engine_holds_beside_a_trial_is_named_as_its_and_counted_used() -> None:
    production = Holder(NO_SUCH_PID + 9, 24 * GIB, None)
    kept = without_holders(host(TargetGpu("0", gpu(0, 56.0), (production,))), frozenset({NO_SUCH_PID + 9}))
    result = check_gpu_memory(kept, demand("0"), ME, margin_bytes=GIB)
    assert result.status is CheckStatus.REFUSED  # 56 − 1 GiB margin < 72: its 24 GiB stay used
    assert result.detail == (
        "GPU 0: free 56.00 GiB − 1.00 GiB margin < needed 72.00 GiB; "
        "held by this launcher's engines kept on it (24.00 GiB)"
    )
    assert check_one_model(kept, demand("0"), [], ME).status is CheckStatus.OK  # not a second model


def test_memory_nobody_visible_holds_is_said_to_be_so() -> None:
    result = check_gpu_memory(host(TargetGpu("0", gpu(0, 10.0), ())), demand("0"), ME)
    assert result.detail.endswith("no process visible from here holds it")


def test_a_gpu_that_does_not_exist_is_refused_with_the_ones_that_do() -> None:
    result = check_gpu_memory(host(TargetGpu("5", None, ()), indexes=(0, 1)), demand("5"), ME)
    assert result.status is CheckStatus.REFUSED
    assert result.detail == "GPU 5 does not exist (this host has GPUs 0,1)"
    none = check_gpu_memory(host(TargetGpu("0", None, ()), indexes=()), demand("0"), ME)
    assert none.detail == "GPU 0 does not exist (this host has GPUs none)"


def test_memory_is_not_judged_where_vllm_would_not_judge_it() -> None:
    no_gpu = GpuDemand((), "", 0.9, no_gpu_reason="the simulator without --sim-gpu-allocate uses no GPU")
    assert check_gpu_memory(host(), no_gpu, ME).status is CheckStatus.SKIPPED
    kv = GpuDemand(("0",), "test", 0.9, kv_cache_bytes_set=True)
    skipped = check_gpu_memory(host(TargetGpu("0", gpu(0, 1.0), ())), kv, ME)
    assert skipped.status is CheckStatus.SKIPPED and "kv_cache_memory_bytes is set" in skipped.detail
    unread = HostGpus((), (), "no NVML: NVML Shared Library Not Found")
    assert check_gpu_memory(unread, demand("0"), ME).detail == "no NVML: NVML Shared Library Not Found"


def test_too_few_visible_gpus_is_refused_before_any_memory_is_read() -> None:
    short = GpuDemand(
        ("0",), "CUDA_VISIBLE_DEVICES", 0.9, problem="CUDA_VISIBLE_DEVICES names 1 GPU(s) (0) but ..."
    )
    result = check_gpu_memory(HostGpus((), (), "no NVML"), short, ME)
    assert result.status is CheckStatus.REFUSED and result.detail.startswith("CUDA_VISIBLE_DEVICES names 1")
    assert result.hint == "set CUDA_VISIBLE_DEVICES to as many GPUs as the profile needs"


def test_the_cuda_context_vllm_creates_counts_against_the_free_memory() -> None:
    gpus = host(TargetGpu("0", gpu(0, 72.3), ()))
    assert check_gpu_memory(gpus, demand("0"), ME).status is CheckStatus.OK
    tight = check_gpu_memory(gpus, demand("0"), ME, context_bytes=600 * MIB)
    assert tight.status is CheckStatus.REFUSED and "− 0.59 GiB CUDA context" in tight.detail


def test_a_reload_counts_what_the_serving_engine_holds_as_free() -> None:
    serving = Holder(NO_SUCH_PID + 1, 70 * GIB, None)
    other = Holder(NO_SUCH_PID + 2, 5 * GIB, None)
    gpus = host(TargetGpu("0", gpu(0, 5.0), (serving, other)))
    after = without_serving(gpus, frozenset({NO_SUCH_PID + 1}))
    target = after.targets[0]
    assert target.holders == (other,) and target.device is not None and target.device.free_bytes == 75 * GIB
    assert check_gpu_memory(after, demand("0"), ME).status is CheckStatus.OK
    assert without_serving(gpus, frozenset()) is gpus


def test_an_orphan_blocks_when_it_is_ours_or_sits_on_our_gpus() -> None:
    ours = process(1, Role.ORPHAN, deployment="prod@/state")
    on_our_gpu = process(2, Role.ORPHAN, deployment="other@/elsewhere")
    elsewhere = process(3, Role.ORPHAN, deployment="other@/elsewhere")
    live = process(4, Role.SERVER, deployment="prod@/state")
    gpus = host(TargetGpu("0", gpu(0, 40.0), (Holder(on_our_gpu.pid, 30 * GIB, on_our_gpu),)))
    scan = [ours, on_our_gpu, elsewhere, live]
    assert relevant_orphans(scan, gpus, "VLLM", "prod@/state") == [ours, on_our_gpu]


def test_an_unmarked_orphan_is_ours_only_by_our_own_title_prefix() -> None:
    mine = process(1, Role.ORPHAN, title="PROD::EngineCore")
    default = process(2, Role.ORPHAN, title="VLLM::EngineCore")
    assert mine.owned_by("prod@/state", "PROD") and not default.owned_by("prod@/state", "PROD")
    assert not default.owned_by("prod@/state", "VLLM"), "the default prefix claims nothing"
    assert prefixes_for({"VLLM_PROCESS_NAME_PREFIX": "PROD"}) == ("VLLM", "PROD")
    assert prefixes_for({"VLLM_PROCESS_NAME_PREFIX": "VLLM"}) == ("VLLM",) == prefixes_for({})


def test_blocking_orphans_refuse_with_what_they_hold_and_how_to_reap_them() -> None:
    ours = process(1, Role.ORPHAN, deployment="prod@/state")
    foreign = process(3, Role.ORPHAN, deployment="other@/elsewhere")
    gpus = host(TargetGpu("0", gpu(0, 40.0), (Holder(ours.pid, 30 * GIB, ours),)))
    result = check_orphans([ours, foreign], gpus, "VLLM", "prod", ME, "prod@/state", now=1000.0 + 7200)
    assert result.status is CheckStatus.REFUSED and result.name is CheckName.ORPHANS
    assert result.detail.startswith(f"1 vLLM orphan(s), parent gone: pid {ours.pid} VLLM::Worker_TP0 "
                                    "(orphan: its parent is gone, 30.0 GiB on GPU 0)")  # fmt: skip
    assert (
        f"left alone: VLLM::Worker_TP0 (deployment other@/elsewhere, user {ME}, pid {foreign.pid}, age 2h00m)"
        in (result.detail)
    )
    assert result.hint == REAP_HINT.format(profile="prod")
    assert result.data == {"orphans": [ours.pid], "foreign_orphans": [foreign.pid]}


def test_only_foreign_orphans_warn_and_none_at_all_is_ok() -> None:
    foreign = process(3, Role.ORPHAN, deployment="other@/elsewhere")
    warned = check_orphans([foreign], host(), "VLLM", "prod", ME, "prod@/state", now=1000.0 + 90)
    assert warned.status is CheckStatus.WARNING and "age 1 min" in warned.detail
    assert warned.hint is not None and "--reap-foreign PID" in warned.hint
    clean = check_orphans([process(4, Role.SERVER)], host(), "VLLM", "prod", ME, "prod@/state", now=0.0)
    assert (clean.status, clean.detail) == (CheckStatus.OK, "no vLLM orphans")


def test_a_second_model_on_the_same_gpus_is_refused_by_lock_or_by_nvml() -> None:
    lock = LockHolder("0", 4242, "staging", "2026-12-01T10:00:00Z")
    locked = check_one_model(host(TargetGpu("0", gpu(0, 79.0), ())), demand("0"), [lock], ME)
    assert locked.status is CheckStatus.REFUSED
    assert locked.detail == ("one model per GPU set: GPU 0 is locked by profile 'staging', launcher pid 4242 "
                             "since 2026-12-01T10:00:00Z")  # fmt: skip
    assert locked.data == {"lock_holders": [4242]}
    launcher_root = view(NO_SUCH_PID + 50, ("launch", "--profile", "staging"))
    marked = process(5, Role.SERVER, title="VLLM::EngineCore", deployment="staging@/s", root=launcher_root)
    served = host(TargetGpu("0", gpu(0, 10.0), (Holder(marked.pid, 60 * GIB, marked),)))
    by_nvml = check_one_model(served, demand("0"), [], ME)
    assert "GPU 0 already serves a model: pid" in by_nvml.detail and "model under pid" in by_nvml.detail
    assert by_nvml.hint is not None and by_nvml.hint.startswith("stop the other model first")


def test_a_model_started_by_hand_is_named_with_the_pid_an_operator_would_stop() -> None:
    api = view(NO_SUCH_PID + 60, ("vllm", "serve", "org/m"))
    worker = process(6, Role.SERVER, title="VLLM::Worker_TP0", root=api)
    served = host(TargetGpu("1", gpu(1, 10.0), (Holder(worker.pid, 60 * GIB, worker),)))
    result = check_one_model(served, demand("1"), [], ME)
    assert result.hint is not None and result.hint.startswith(f"pid {api.pid} was not started by vllm-gate")
    assert f"`kill {api.pid}`" in result.hint


def test_free_gpus_say_which_were_checked_and_how() -> None:
    result = check_one_model(host(TargetGpu("0", gpu(0, 79.0), ())), demand("0", "1"), [], ME)
    assert result.status is CheckStatus.OK
    assert result.detail == "GPUs 0,1: no other launcher holds their locks; NVML lists no model server"
    unread = check_one_model(HostGpus((), (), "no NVML"), demand("0"), [], ME)
    assert unread.detail.endswith("NVML part skipped: no NVML")
    no_gpu = GpuDemand((), "", 0.9, no_gpu_reason="no GPU visible to vLLM")
    assert check_one_model(host(), no_gpu, [], ME).status is CheckStatus.SKIPPED


def test_a_titled_process_whose_parents_lead_to_init_is_an_orphan() -> None:
    init = view(1, ("/sbin/init",), ppid=0, name="systemd")
    engine = view(NO_SUCH_PID + 10, ("VLLM::EngineCore",), ppid=1)
    worker = view(NO_SUCH_PID + 11, ("VLLM::Worker_TP0",), ppid=engine.pid)
    views = {v.pid: v for v in (init, engine, worker)}
    found = classify(worker, ("VLLM",), views)
    assert (found.role, found.title, found.deployment) == (Role.ORPHAN, "VLLM::Worker_TP0", None)
    tini = view(NO_SUCH_PID + 1, ("tini", "--"), ppid=0, name="tini")
    under_tini = view(NO_SUCH_PID + 12, ("VLLM::EngineCore",), ppid=tini.pid)
    assert classify(under_tini, ("VLLM",), {tini.pid: tini}).role is Role.ORPHAN


def test_a_titled_process_under_a_live_program_is_part_of_its_model() -> None:
    shell = view(NO_SUCH_PID + 20, ("bash",), ppid=0, name="bash")
    api = view(NO_SUCH_PID + 21, ("/usr/bin/vllm", "serve", "org/m"), ppid=shell.pid)
    engine = view(NO_SUCH_PID + 22, ("VLLM::EngineCore",), ppid=api.pid)
    views = {v.pid: v for v in (shell, api, engine)}
    found = classify(engine, ("VLLM",), views)
    assert found.role is Role.SERVER and found.root == api
    server = classify(api, ("VLLM",), views)
    assert server.role is Role.SERVER and server.root == api and server.title is None
    assert (
        found.describe(60 * GIB, me=ME)
        == f"pid {engine.pid} VLLM::EngineCore (model under pid {api.pid} vllm serve org/m, 60.0 GiB)"
    )


def test_an_api_server_left_at_init_is_a_live_server_unless_a_launcher_started_it() -> None:
    by_hand = view(NO_SUCH_PID + 30, ("vllm", "serve", "org/m"), ppid=1)
    init = view(1, ("/sbin/init",), ppid=0, name="systemd")
    found = classify(by_hand, ("VLLM",), {1: init})
    assert found.role is Role.SERVER, "no VLLM_GATE_PROFILE in its environment: someone's nohup vllm serve"
    unrelated = view(NO_SUCH_PID + 31, ("python", "train.py"), ppid=1)
    assert classify(unrelated, ("VLLM",), {1: init}).role is Role.OTHER
    lookalike = view(NO_SUCH_PID + 32, ("Foo::Bar",), ppid=1)
    assert classify(lookalike, ("VLLM",), {1: init}).role is Role.OTHER, "an unknown role is not vLLM's"
    renamed = view(NO_SUCH_PID + 33, ("PROD::Worker_TP1",), ppid=1)
    assert classify(renamed, ("VLLM",), {1: init}).title == "PROD::Worker_TP1", (
        "a known role under any prefix"
    )


def test_an_orphan_says_whose_it_is_and_how_old() -> None:
    orphan = process(1, Role.ORPHAN, deployment="prod@/var/lib/vllm-gate", user="bob")
    assert orphan.owner(1000.0 + 59) == (
        f"deployment prod@/var/lib/vllm-gate, user bob, pid {orphan.pid}, age 59 s"
    )
    unmarked = process(2, Role.ORPHAN).owner(1000.0 + 3 * 3600 + 12 * 60)
    assert unmarked == f"no deployment mark, user alice, pid {NO_SUCH_PID + 2}, age 3h12m"
    assert (
        orphan.describe(None, me=ME)
        == f"pid {orphan.pid} VLLM::Worker_TP0 (orphan: its parent is gone, user bob)"
    )


def test_free_memory_exactly_at_the_demand_is_enough() -> None:
    """vLLM refuses only when free < utilization × total: equal passes there, so it passes here."""
    total = 80 * GIB
    exact = GpuDevice(0, "GPU-0000", "H100", total, total // 2, total // 2)
    gpus = host(TargetGpu("0", exact, ()))
    assert check_gpu_memory(gpus, demand("0", utilization=0.5), ME).status is CheckStatus.OK
    short = replace(exact, free_bytes=total // 2 - 1)
    assert check_gpu_memory(host(TargetGpu("0", short, ())), demand("0", utilization=0.5), ME).status is (
        CheckStatus.REFUSED
    )


def test_the_demand_is_of_cudas_total_not_nvmls() -> None:
    """NVML's total includes the driver-reserved memory that CUDA (and so vLLM) never sees."""
    device = GpuDevice(0, "GPU-0000", "H200", 1000 * MIB, 0, 900 * MIB, reserved_bytes=100 * MIB)
    result = check_gpu_memory(host(TargetGpu("0", device, ())), demand("0", utilization=1.0), ME)
    assert result.status is CheckStatus.OK, "900 MiB free covers 1.0 × (1000 − 100) MiB"
    assert result.data["gpus"][0]["needed_mib"] == 900


def test_every_short_or_missing_gpu_is_named_and_the_fine_ones_are_not() -> None:
    gpus = host(
        TargetGpu("0", gpu(0, 79.0), ()),
        TargetGpu("1", gpu(1, 10.0), ()),
        TargetGpu("4", None, ()),
    )
    result = check_gpu_memory(gpus, demand("0", "1", "4"), ME)
    assert result.status is CheckStatus.REFUSED
    assert result.detail == (
        "GPU 1: free 10.00 GiB < needed 72.00 GiB; no process visible from here holds it; "
        "GPU 4 does not exist (this host has GPUs 0,1)"
    )
    assert [row["gpu"] for row in result.data["gpus"]] == ["0", "1"], "figures for the GPUs that exist"


def test_the_memory_a_parked_engine_holds_stays_used_while_it_leaves_the_holders() -> None:
    parked = Holder(NO_SUCH_PID + 1, 60 * GIB, None)
    other = Holder(NO_SUCH_PID + 2, 5 * GIB, None)
    gpus = host(TargetGpu("0", gpu(0, 15.0), (parked, other)))
    after = without_holders(gpus, frozenset({parked.pid}))
    target = after.targets[0]
    assert target.holders == (other,)
    assert target.device is not None and target.device.free_bytes == 15 * GIB, (
        "a sleeper's memory is not free"
    )
    assert without_holders(gpus, frozenset()) is gpus


def test_a_reload_frees_only_what_the_serving_engine_holds_on_each_gpu() -> None:
    serving = NO_SUCH_PID + 1
    gpus = host(
        TargetGpu("0", gpu(0, 5.0), (Holder(serving, 70 * GIB, None),)),
        TargetGpu("1", gpu(1, 5.0), (Holder(serving, None, None),)),  # the driver did not say how much
    )
    after = without_serving(gpus, frozenset({serving}))
    assert [t.device.free_bytes for t in after.targets if t.device is not None] == [75 * GIB, 5 * GIB]
    assert all(t.holders == () for t in after.targets)


def test_what_each_process_holds_is_gathered_across_the_target_gpus() -> None:
    a, b = NO_SUCH_PID + 1, NO_SUCH_PID + 2
    gpus = host(
        TargetGpu("0", gpu(0, 10.0), (Holder(a, 30 * GIB, None), Holder(b, None, None))),
        TargetGpu("1", gpu(1, 10.0), (Holder(a, 31 * GIB, None),)),
    )
    assert gpus.held_on_targets() == {a: [("0", 30 * GIB), ("1", 31 * GIB)], b: [("0", None)]}


def test_an_orphan_on_several_gpus_lists_each_and_one_the_driver_does_not_size_is_named_bare() -> None:
    ours = process(1, Role.ORPHAN, deployment="prod@/state")
    gpus = host(
        TargetGpu("0", gpu(0, 40.0), (Holder(ours.pid, 30 * GIB, ours),)),
        TargetGpu("1", gpu(1, 40.0), (Holder(ours.pid, None, ours),)),
    )
    result = check_orphans([ours], gpus, "VLLM", "prod", ME, "prod@/state", now=1000.0)
    assert result.detail == (
        f"1 vLLM orphan(s), parent gone: pid {ours.pid} VLLM::Worker_TP0 "
        "(orphan: its parent is gone, 30.0 GiB on GPU 0, on GPU 1)"
    )


def test_a_foreign_live_server_is_never_an_orphan_to_reap() -> None:
    live = process(1, Role.SERVER, deployment="other@/elsewhere")
    gpus = host(TargetGpu("0", gpu(0, 40.0), (Holder(live.pid, 30 * GIB, live),)))
    assert relevant_orphans([live], gpus, "VLLM", "prod@/state") == []
    assert check_orphans([live], gpus, "VLLM", "prod", ME, "prod@/state", now=0.0).status is CheckStatus.OK


def test_locks_and_model_servers_on_several_gpus_are_all_named() -> None:
    lock = LockHolder("1", 4242, "staging", "2026-12-01T10:00:00Z")
    a = process(1, Role.SERVER, title="VLLM::Worker_TP0", deployment="x@/s")
    b = process(2, Role.SERVER, title="VLLM::Worker_TP1", deployment="x@/s")
    trainer = not_vllm(3, user="bob")
    gpus = host(
        TargetGpu("0", gpu(0, 10.0), (Holder(a.pid, 60 * GIB, a), Holder(trainer.pid, 1 * GIB, trainer))),
        TargetGpu("1", gpu(1, 10.0), (Holder(b.pid, 60 * GIB, b),)),
    )
    result = check_one_model(gpus, demand("0", "1"), [lock], ME)
    assert result.status is CheckStatus.REFUSED
    parts = result.detail.removeprefix("one model per GPU set: ").split("; ")
    assert parts[0] == "GPU 1 is locked by profile 'staging', launcher pid 4242 since 2026-12-01T10:00:00Z"
    assert parts[1].startswith(f"GPU 0 already serves a model: pid {a.pid} VLLM::Worker_TP0")
    assert str(trainer.pid) not in result.detail, "a process that is not a model server is not one"
    assert parts[2].startswith(f"GPU 1 already serves a model: pid {b.pid} VLLM::Worker_TP1")


def test_a_hand_started_model_on_two_gpus_names_its_api_server_once() -> None:
    api = view(NO_SUCH_PID + 60, ("vllm", "serve", "org/m"))
    workers = [process(n, Role.SERVER, title=f"VLLM::Worker_TP{n}", root=api) for n in (0, 1)]
    gpus = host(
        *(TargetGpu(str(n), gpu(n, 10.0), (Holder(w.pid, 60 * GIB, w),)) for n, w in enumerate(workers))
    )
    hint = check_one_model(gpus, demand("0", "1"), [], ME).hint
    assert hint is not None and hint.startswith(f"pid {api.pid} was not started by vllm-gate")
    assert f"`kill {api.pid}`" in hint and hint.count(str(api.pid)) == 2


def test_a_marked_and_an_unmarked_model_name_only_the_unmarked_one_for_a_hand_stop() -> None:
    marked = process(1, Role.SERVER, deployment="x@/s")
    unmarked = process(2, Role.SERVER)
    gpus = host(
        TargetGpu("0", gpu(0, 10.0), (Holder(marked.pid, 1, marked), Holder(unmarked.pid, 1, unmarked)))
    )
    hint = check_one_model(gpus, demand("0"), [], ME).hint
    assert hint is not None and hint.startswith(f"pid {unmarked.pid} was not started by vllm-gate")
    assert str(marked.pid) not in hint


# ---- orphans and process views ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(-5, "0 s"), (0, "0 s"), (59.9, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1h00m"),
     (3660, "1h01m"), (26 * 3600 + 5 * 60, "26h05m")],
)  # fmt: skip
def test_an_orphans_age_is_seconds_then_minutes_then_hours_and_minutes(seconds: float, shown: str) -> None:
    orphan = process(1, Role.ORPHAN)
    assert orphan.owner(1000.0 + seconds).endswith(f"age {shown}")


def test_a_mark_decides_whose_an_orphan_is_before_any_title() -> None:
    """A marked orphan is its deployment's, even under our own title prefix; unmarked, the prefix
    claims it only when it is ours and not vLLM's default."""
    marked_elsewhere = process(1, Role.ORPHAN, title="PROD::EngineCore", deployment="other@/x")
    assert not marked_elsewhere.owned_by("prod@/state", "PROD")
    assert process(2, Role.ORPHAN, deployment="prod@/state").owned_by("prod@/state", "VLLM")
    untitled = HostProcess(view(NO_SUCH_PID + 3, ("vllm", "serve", "m")), Role.ORPHAN, None, None)
    assert not untitled.owned_by("prod@/state", "PROD"), "no title, no prefix"
    assert process(4, Role.ORPHAN, title="PROD::Worker_TP0").prefix == "PROD"


def test_the_deployment_is_the_profile_at_its_resolved_state_dir(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "state")
    assert deployment_id(tmp_path / "link", "prod") == f"prod@{(tmp_path / 'state').resolve()}"
    assert deployment_id(tmp_path / "state" / ".." / "state", "prod") == deployment_id(
        tmp_path / "state", "prod"
    )
    assert mark_env("prod@/s") == {"VLLM_GATE_DEPLOYMENT": "prod@/s", "SPT_NOENV": "1"}


def test_a_server_is_described_by_what_it_hangs_off_and_another_users_process_by_its_user() -> None:
    api = view(NO_SUCH_PID + 70, ("vllm", "serve", "org/m"), user="bob")
    itself = HostProcess(api, Role.SERVER, None, api)
    assert itself.describe(None, me=ME) == f"pid {api.pid} vllm serve org/m (live model server, user bob)"
    assert itself.describe(None, me="bob") == f"pid {api.pid} vllm serve org/m (live model server)"
    other = not_vllm(5)
    assert other.describe(None, me=ME).endswith(f"(user {ME})"), "not vLLM: whose it is, always"


@pytest.mark.parametrize("init", sorted(INIT_NAMES))
def test_a_titled_process_under_any_init_like_parent_is_an_orphan(init: str) -> None:
    parent = view(NO_SUCH_PID + 80, (f"/sbin/{init}",), ppid=0, name=init)
    engine = view(NO_SUCH_PID + 81, ("VLLM::EngineCore",), ppid=parent.pid)
    assert classify(engine, ("VLLM",), {parent.pid: parent}).role is Role.ORPHAN


def test_a_titled_process_whose_parent_cannot_be_found_is_an_orphan() -> None:
    engine = view(NO_SUCH_PID + 90, ("VLLM::EngineCore",), ppid=NO_SUCH_PID + 91)
    assert classify(engine, ("VLLM",), {}).role is Role.ORPHAN


def test_an_endless_chain_of_titled_parents_stops_as_a_server_without_a_root() -> None:
    """A cycle in a stale process table must not loop for ever: the walk stops after 64 steps."""
    a = view(NO_SUCH_PID + 100, ("VLLM::Worker_TP0",), ppid=NO_SUCH_PID + 101)
    b = view(NO_SUCH_PID + 101, ("VLLM::EngineCore",), ppid=NO_SUCH_PID + 100)
    found = classify(a, ("VLLM",), {a.pid: a, b.pid: b})
    assert (found.role, found.root, found.title) == (Role.SERVER, None, "VLLM::Worker_TP0")


def test_a_worker_under_its_engine_under_a_launcher_is_part_of_a_live_model() -> None:
    launcher = view(NO_SUCH_PID + 110, ("/opt/venv/bin/python3", "/opt/venv/bin/launch", "--profile", "p"))
    engine = view(NO_SUCH_PID + 111, ("VLLM::EngineCore",), ppid=launcher.pid)
    worker = view(NO_SUCH_PID + 112, ("VLLM::Worker_TP1",), ppid=engine.pid)
    found = classify(worker, ("VLLM",), {v.pid: v for v in (launcher, engine, worker)})
    assert found.role is Role.SERVER and found.root == launcher


@pytest.mark.parametrize(
    ("cmdline", "title"),
    [
        (("VLLM::DPCoordinator",), "VLLM::DPCoordinator"),
        (("VLLM::APIServer_1",), "VLLM::APIServer_1"),
        (("VLLM::Worker_DP1_TP3_EP3",), "VLLM::Worker_DP1_TP3_EP3"),
        (("VLLM::anything", "x"), "VLLM::anything"),  # our own prefix: any title
        (("PROD::EngineCore extra words",), "PROD::EngineCore"),  # a known role under any prefix
        (("Foo::Workers",), None),  # not a role vLLM has
        (("a/b::EngineCore",), None),  # a path is no prefix
        (("  VLLM::EngineCore",), "VLLM::EngineCore"),
        (("python", "VLLM::EngineCore"), None),
    ],
)
def test_what_counts_as_a_vllm_title(cmdline: tuple[str, ...], title: str | None) -> None:
    assert vllm_title(cmdline, ("VLLM",)) == title


def test_a_deployments_own_prefix_claims_any_title_under_it() -> None:
    assert vllm_title(("PROD::custom",), ("VLLM", "PROD")) == "PROD::custom"
    assert vllm_title(("PROD::custom",), ("VLLM",)) is None


@pytest.mark.parametrize(
    ("cmdline", "server"),
    [
        (("/usr/bin/python3", "/usr/local/bin/vllm", "serve", "org/m"), True),
        (("python3", "-m", "vllm.entrypoints.cli.main", "serve"), True),
        (("vllm", "--help", "serve"), False),  # "serve" must follow the program itself
        (("/opt/vllm/bin/python", "train.py"), False),  # a vllm directory is not the vllm program
    ],
)
def test_more_api_server_command_lines(cmdline: tuple[str, ...], server: bool) -> None:
    assert is_api_server(view(NO_SUCH_PID, cmdline)) is server


def test_a_label_keeps_a_title_whole_and_a_program_by_its_name() -> None:
    assert view(1, ("VLLM::Worker_TP0", "")).label == "VLLM::Worker_TP0"
    assert view(1, ("/usr/lib/a::b/prog", "x")).label == "/usr/lib/a::b/prog x", "a title-like path kept"
    assert view(1, ("/usr/bin/python3", "-c", "x" * 30)).shortened(20) == "python3 -c xxxxxxxx…"
    assert len(view(1, ("/usr/bin/python3", "-c", "x" * 30)).shortened(20)) == 20
