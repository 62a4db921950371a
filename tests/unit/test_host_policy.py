"""Which GPUs a profile will use, what vLLM will demand of them, and the `[preflight]` table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from launcher.errors import BadInput
from launcher.host.gpu import GIB, MIB, GpuDevice, resolve_device
from launcher.host.gpu_checks import HostGpus, TargetGpu, check_gpu_memory
from launcher.host.host_checks import check_host_memory, check_model_path, check_swap
from launcher.host.policy import GpuDemand, HostPolicy, gpu_demand
from launcher.host.report import CheckStatus
from launcher.host.request import HostRequest
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.supervisor.wiring import host_request


def plan(profiles_dir: Path, body: str, command: str = '["vllm", "serve"]') -> HostRequest:
    """What the host checks read of profile `p` with `body`."""
    (profiles_dir / "p.toml").write_text(f'[engine]\ncommand = {command}\nmodel = "org/m"\n{body}')
    built = build_plan(profiles_dir, "p")
    assert not built.errors, built.errors
    return HostRequest.from_plan(built)


def test_default_gpus_are_the_first_tensor_times_pipeline(profiles_dir: Path) -> None:
    demand = gpu_demand(
        plan(profiles_dir, "[args]\ntensor_parallel_size = 2\npipeline_parallel_size = 2\n"), {}
    )
    assert demand.ids == ("0", "1", "2", "3")
    assert demand.utilization == 0.92, "vLLM 0.33's default gpu_memory_utilization"


def test_cuda_visible_devices_of_the_profile_wins_over_the_launchers(profiles_dir: Path) -> None:
    body = "[args]\ntensor_parallel_size = 2\ngpu_memory_utilization = 0.3\n"
    body += '[env]\nCUDA_VISIBLE_DEVICES = "2,3,1"\n'
    demand = gpu_demand(plan(profiles_dir, body), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert (demand.ids, demand.utilization) == (("2", "3"), 0.3)
    assert demand.source == "CUDA_VISIBLE_DEVICES in the profile's [env]"
    launcher_env = gpu_demand(
        plan(profiles_dir, "[args]\ntensor_parallel_size = 2\n"), {"CUDA_VISIBLE_DEVICES": "GPU-ab,GPU-cd"}
    )
    assert launcher_env.ids == ("GPU-ab", "GPU-cd")


def test_too_few_visible_gpus_is_a_problem(profiles_dir: Path) -> None:
    demand = gpu_demand(
        plan(profiles_dir, "[args]\ntensor_parallel_size = 4\n"), {"CUDA_VISIBLE_DEVICES": "0,1"}
    )
    assert demand.problem is not None and "names 2 GPU(s) (0,1) but the profile needs 4" in demand.problem


def test_the_simulator_uses_a_gpu_only_when_asked(profiles_dir: Path) -> None:
    sim = '["vllm-sim", "serve"]'
    assert not gpu_demand(plan(profiles_dir, "", sim), {}).uses_gpu
    assert gpu_demand(plan(profiles_dir, "[args]\nsim_gpu_allocate = true\n", sim), {}).ids == ("0",)
    assert not gpu_demand(plan(profiles_dir, ""), {"CUDA_VISIBLE_DEVICES": ""}).uses_gpu


def test_preflight_table_defaults_and_bad_values(profiles_dir: Path) -> None:
    policy = HostPolicy.from_request(plan(profiles_dir, ""))
    assert (policy.reap_orphans, policy.reap_grace_s, policy.restart_max_failures) == (False, 10.0, 3)
    # The declared range refuses it in the dry run, before any policy is built.
    (profiles_dir / "p.toml").write_text('[engine]\nmodel = "m"\n[preflight]\nreap_grace_s = -1\n')
    assert any("preflight.reap_grace_s = -1: must be ≥ 0" in e for e in build_plan(profiles_dir, "p").errors)
    (profiles_dir / "p.toml").write_text('[engine]\nmodel = "m"\n[preflight]\nreap_orphan = true\n')
    assert any("preflight.reap_orphan: unknown key" in e for e in build_plan(profiles_dir, "p").errors)


def test_gpu_memory_is_judged_as_vllm_will_judge_it_on_an_h200() -> None:
    """NVML figures recorded on the H200 while torch held 120 GiB (scripts/real-vllm/nvml-memory.py);
    vLLM then said: Free memory on device cuda:0 (18.77/139.8 GiB) ... (0.2, 27.96 GiB)."""
    h200 = GpuDevice(0, "GPU-0abc", "H200", 143771 * MIB, 123403 * MIB, 19753 * MIB, reserved_bytes=615 * MIB)
    gpus = HostGpus(targets=(TargetGpu("0", h200, ()),), indexes=(0,), skip_reason=None)
    demand = GpuDemand(("0",), "test", 0.2)
    refused = check_gpu_memory(gpus, demand, "me", context_bytes=600 * MIB)
    assert refused.status is CheckStatus.REFUSED
    assert refused.detail.startswith("GPU 0: free 19.29 GiB − 0.59 GiB CUDA context < needed 27.96 GiB")
    # 300 MiB more than needed by NVML, 300 MiB short once vLLM's own CUDA context exists: refused.
    needed_mib = int(0.2 * 143156)
    edge = replace(h200, free_bytes=(needed_mib + 300) * MIB)
    edge_gpus = replace(gpus, targets=(TargetGpu("0", edge, ()),))
    assert check_gpu_memory(edge_gpus, demand, "me", context_bytes=600 * MIB).status is CheckStatus.REFUSED
    assert check_gpu_memory(edge_gpus, demand, "me").status is CheckStatus.OK


def test_cuda_style_device_names_resolve() -> None:
    devices = [GpuDevice(i, f"GPU-{i}abc", "H200", 1, 0, 1) for i in range(2)]
    assert resolve_device("1", devices) == devices[1]
    assert resolve_device("GPU-0a", devices) == devices[0]
    assert resolve_device("GPU-", devices) is None, "an ambiguous UUID prefix names no device"
    assert resolve_device("MIG-x", devices) is None


def test_host_memory_swap_and_model_path_decisions(tmp_path: Path) -> None:
    assert check_host_memory(3 * GIB, 2.0).status is CheckStatus.OK
    assert check_host_memory(1 * GIB, 2.0).status is CheckStatus.REFUSED
    assert (
        check_swap(5 * GIB, 4.0).detail
        == "swap: 5.00 GiB in use > 4 GiB allowed (preflight.max_swap_used_gib)"
    )
    assert check_swap(1 * GIB, 4.0).status is CheckStatus.OK
    assert check_model_path(str(tmp_path)).status is CheckStatus.OK
    assert check_model_path(str(tmp_path / "missing.gguf")).status is CheckStatus.REFUSED
    assert check_model_path("Qwen/Qwen3-8B").status is CheckStatus.SKIPPED


def test_a_last_good_record_asks_the_host_checks_what_its_plan_asked(profiles_dir: Path) -> None:
    """The supervisor's hooks build the request from the candidate (a last-good record has no
    profile file): it must be the request the plan itself makes."""
    body = (
        'api_key_env = "MY_KEY"\n[args]\ntensor-parallel-size = 2\n[env]\nCUDA_VISIBLE_DEVICES = "1,2"\n'
        "[preflight]\nreap_grace_s = 3.0\nmin_host_available_gib = 0.5\n"
    )
    (profiles_dir / "p.toml").write_text(f'[engine]\nmodel = "/models/m"\nport = 8123\n{body}')
    built = build_plan(profiles_dir, "p")
    assert not built.errors, built.errors
    record = json.loads(json.dumps(Candidate.from_plan(built).to_record()))
    request = host_request(Candidate.from_record(record))
    assert request == HostRequest.from_plan(built)
    assert (request.model, request.port, request.has_secret_env) == ("/models/m", 8123, True)
    assert gpu_demand(request, {}).ids == ("1", "2")
    assert HostPolicy.from_request(request).reap_grace_s == 3.0


def request(
    args: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    argv: tuple[str, ...] = ("vllm", "serve", "org/m"),
    preflight: Mapping[str, object] | None = None,
) -> HostRequest:
    """A request as the host checks read it, built by hand (no profile file)."""
    return HostRequest(
        profile="p",
        argv=argv,
        env=env or {},
        args=args or {},
        host="127.0.0.1",
        port=8000,
        model="org/m",
        fingerprint="f",
        has_secret_env=False,
        preflight=preflight or {},
    )


def test_the_world_is_tensor_times_pipeline_times_data_parallel() -> None:
    demand = gpu_demand(request({"tensor_parallel_size": 2, "data_parallel_size": 3}), {})
    assert demand.ids == ("0", "1", "2", "3", "4", "5")
    assert demand.source == "the default for tensor × pipeline × data parallel = 6"


def test_the_local_part_of_data_parallel_wins_over_the_whole() -> None:
    """Across nodes only data_parallel_size_local ranks run on this host."""
    args = {"tensor_parallel_size": 2, "data_parallel_size": 4, "data_parallel_size_local": 1}
    assert gpu_demand(request(args), {}).ids == ("0", "1")


@pytest.mark.parametrize("size", [0, -2, True, "4", 2.0, None])
def test_a_size_that_is_not_a_positive_integer_counts_as_one(size: object) -> None:
    assert gpu_demand(request({"tensor_parallel_size": size}), {}).ids == ("0",)


def test_dashed_keys_are_read_as_their_snake_form() -> None:
    demand = gpu_demand(request({"tensor-parallel-size": 2, "gpu-memory-utilization": 0.5}), {})
    assert (demand.ids, demand.utilization) == (("0", "1"), 0.5)


def test_only_the_first_world_of_the_visible_gpus_are_used_spaces_and_empty_entries_dropped() -> None:
    demand = gpu_demand(request({"tensor_parallel_size": 2}, env={"CUDA_VISIBLE_DEVICES": " 3 , ,5, 7,"}), {})
    assert demand.ids == ("3", "5") and demand.problem is None


@pytest.mark.parametrize("visible", ["", " ", "-1", "-1,0", ","])
def test_cuda_visible_devices_that_hides_every_gpu_means_no_gpu(visible: str) -> None:
    demand = gpu_demand(request(), {"CUDA_VISIBLE_DEVICES": visible})
    assert not demand.uses_gpu and demand.ids == ()
    assert demand.no_gpu_reason == (
        f"CUDA_VISIBLE_DEVICES of the launcher's environment is {visible!r}: no GPU visible to vLLM"
    )


def test_the_profiles_empty_visible_devices_hides_the_gpus_even_when_the_launcher_has_some() -> None:
    demand = gpu_demand(request(env={"CUDA_VISIBLE_DEVICES": ""}), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert not demand.uses_gpu and "in the profile's [env]" in str(demand.no_gpu_reason)


def test_a_kv_cache_sized_in_bytes_is_noted_for_the_memory_check() -> None:
    assert gpu_demand(request({"kv_cache_memory_bytes": 8 << 30}), {}).kv_cache_bytes_set
    assert not gpu_demand(request({"kv_cache_memory_bytes": None}), {}).kv_cache_bytes_set
    assert not gpu_demand(request(), {}).kv_cache_bytes_set


def test_the_simulator_is_known_by_its_program_name_wherever_it_is_installed() -> None:
    sim = ("/opt/venv/bin/vllm-sim", "serve", "m")
    assert not gpu_demand(request(argv=sim), {}).uses_gpu
    assert gpu_demand(request(argv=(*sim, "--sim-gpu-allocate")), {}).uses_gpu
    assert gpu_demand(request(argv=("/opt/vllm-sim-wrapper", "serve")), {}).uses_gpu, "not the simulator"
    assert gpu_demand(request(argv=()), {}).uses_gpu


@pytest.mark.parametrize(
    "name",
    ["reap_grace_s", "reap_deadline_s", "min_host_available_gib", "max_swap_used_gib", "cuda_context_mib"],
)
def test_a_negative_amount_in_the_preflight_table_is_bad_input_naming_it(name: str) -> None:
    with pytest.raises(BadInput, match=f"profile 'p': preflight.{name} = -1 must not be negative"):
        HostPolicy.from_request(request(preflight={name: -1}))


def test_zero_failures_allowed_would_never_start_and_is_bad_input() -> None:
    with pytest.raises(BadInput, match="restart_max_failures must be at least 1"):
        HostPolicy.from_request(request(preflight={"restart_max_failures": 0}))
    assert HostPolicy.from_request(request(preflight={"restart_max_failures": 1})).restart_max_failures == 1


def test_the_policy_takes_the_declared_defaults_and_what_the_table_sets() -> None:
    policy = HostPolicy.from_request(request(preflight={"reap_orphans": True, "max_swap_used_gib": 0}))
    assert policy.reap_orphans is True and policy.max_swap_used_gib == 0
    assert HostPolicy.from_request(request()).max_swap_used_gib is None, "no swap limit unless set"
