"""Values vLLM lists only in a flag's metavar are checked like `choices` (issue 44, point 6).

`kv_cache_dtype = "fp9"` passed the dry run: vLLM 0.33.0 lists its KV-cache dtypes only in the
metavar of `--kv-cache-dtype`, so argparse takes any string and the engine refuses it only once it is
configured, after its imports (vllm-facts.md §9.1). Whose list is certain follows the parser names'
rule: the installed vLLM's (here the stand-in of tests/fake_vllm.py) and the simulator's release
refuse, exit 2; the snapshot standing in for a vLLM not importable here warns (a fork lists more).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from launcher.cli import launch
from launcher.profile.plan import build_plan
from tests.conftest import tree_snapshot
from tests.fake_vllm import env_with, make_fake_vllm

REAL = '[engine]\nmodel = "/models/m"\n[args]\n'


def dry_run(profiles: Path, state: Path, name: str, *extra: str) -> Result:
    argv = ["--profiles-dir", str(profiles), "--state-dir", str(state), "--profile", name, "--dry-run"]
    return CliRunner().invoke(launch, [*argv, *extra])


def test_a_value_the_simulators_release_does_not_list_exits_2_naming_the_allowed_values(
    shipped_profiles: Path, state_dir: Path
) -> None:
    (shipped_profiles / "cand.toml").write_text('extends = "demo"\n[args]\nkv_cache_dtype = "fp9"\n')
    before = tree_snapshot(shipped_profiles)
    result = dry_run(shipped_profiles, state_dir, "cand")
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.output.splitlines() if "kv_cache_dtype = 'fp9'" in line]
    assert "vllm-sim (vLLM 0.33) lists no such value for --kv-cache-dtype; one of: auto, bfloat16," in line
    assert "fp8_e4m3" in line and line.endswith("; did you mean fp8?")
    assert tree_snapshot(shipped_profiles) == before


def test_a_listed_value_passes(shipped_profiles: Path, state_dir: Path) -> None:
    (shipped_profiles / "cand.toml").write_text('extends = "demo"\n[args]\nkv_cache_dtype = "fp8_e4m3"\n')
    assert dry_run(shipped_profiles, state_dir, "cand").exit_code == 0


def test_the_snapshot_standing_in_for_a_real_vllm_warns_a_forks_value_does_not_refuse(
    shipped_profiles: Path,
) -> None:
    """prod runs a fork whose `turboquant_2bit_nc` 0.33.0 does not list: without that vLLM here, the
    snapshot is no proof, so the dry run says so and goes on."""
    plan = build_plan(shipped_profiles, "prod")
    assert plan.errors == ()
    [warning] = [w for w in plan.warnings if "turboquant_2bit_nc" in w]
    assert "vLLM 0.33.0 (the snapshot; none here) lists no such value for --kv-cache-dtype" in warning


def test_a_qualified_class_name_is_a_value_the_executor_backend_takes(profiles_dir: Path) -> None:
    (profiles_dir / "p.toml").write_text(
        REAL + 'distributed_executor_backend = "mypkg.executors.MyExecutor"\n'
    )
    assert not [w for w in build_plan(profiles_dir, "p").warnings if "distributed" in w]
    (profiles_dir / "p.toml").write_text(REAL + 'distributed_executor_backend = "rya"\n')
    [warning] = [w for w in build_plan(profiles_dir, "p").warnings if "distributed" in w]
    assert "one of: external_launcher, mp, ray, uni, None; did you mean ray?" in warning


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_with(make_fake_vllm(tmp_path / "site"), tmp_path / "cache", tmp_path / "builds")
    argv = [sys.executable, "-m", "launcher.cli", "--profiles-dir", str(tmp_path / "profiles"),
            "--state-dir", str(tmp_path / "state"), *args]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_the_installed_vllms_list_refuses_and_allow_unknown_lets_a_fork_through(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    path = tmp_path / "profiles" / "prod.toml"
    path.write_text(REAL + 'kv_cache_dtype = "turbo_2bit"\ndistributed_executor_backend = "None"\n')
    assert _launch(tmp_path, "--profile", "prod", "--dry-run").returncode == 0
    refused = _launch(tmp_path, "set", "prod", "kv_cache_dtype=fp9", "--tag", "bad")
    assert refused.returncode == 2, refused.stderr
    assert "args.kv_cache_dtype = 'fp9': vLLM 9.9.9 lists no such value for --kv-cache-dtype; one of: " \
        "auto, fp8, turbo_2bit; did you mean fp8?" in refused.stderr  # fmt: skip
    assert not list(path.parent.glob("*.bak_*")) and "turbo_2bit" in path.read_text()
    path.write_text(REAL + 'kv_cache_dtype = "fp9"\n')
    forked = _launch(tmp_path, "--profile", "prod", "--dry-run", "--allow-unknown")
    assert forked.returncode == 0 and "lists no such value" in forked.stdout + forked.stderr
