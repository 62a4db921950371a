"""`launch --profile NAME --dry-run`: the shipped profiles, validation, diffs and every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from tests.conftest import SHIPPED_PROFILES, tree_snapshot

PROD_ARGV = [
    "vllm", "serve", "/models/fable-9b-IQ4_XS.gguf",
    "--served-model-name", "fable-9b", "--host", "127.0.0.1", "--port", "8000",
    "--compilation-config", '{"cudagraph_capture_sizes":[1,2,4,8]}',
    "--enable-auto-tool-choice",
    "--gpu-memory-utilization", "0.3",
    "--kv-cache-dtype", "turboquant_2bit_nc",
    "--max-model-len", "65536",
    "--max-num-seqs", "32",
    "--tensor-parallel-size", "4",
    "--tool-call-parser", "hermes",
]  # fmt: skip


def dry_run(profiles: Path, state: Path, name: str, *extra: str) -> Result:
    args = [
        "--profiles-dir",
        str(profiles),
        "--state-dir",
        str(state),
        "--profile",
        name,
        "--dry-run",
        *extra,
    ]
    return CliRunner().invoke(launch, args)


def dry_json(profiles: Path, state: Path, name: str) -> dict[str, Any]:
    result = dry_run(profiles, state, name, "--json")
    plan: dict[str, Any] = json.loads(result.stdout)
    return plan


def test_prod_renders_the_operator_command(shipped_profiles: Path, state_dir: Path) -> None:
    report = dry_json(shipped_profiles, state_dir, "prod")
    assert report["argv"] == PROD_ARGV
    assert report["env"] == {"VLLM_SM70_QWEN_GDN_FULL_FORWARD": "0"}
    assert report["profile"] == "prod" and report["chain"] == ["prod", "base"]
    assert report["errors"] == []
    assert any("VLLM_SM70_QWEN_GDN_FULL_FORWARD" in w for w in report["warnings"])  # a fork's env flag


def test_human_form_shows_command_env_and_provenance(shipped_profiles: Path, state_dir: Path) -> None:
    result = dry_run(shipped_profiles, state_dir, "prod", "--explain")
    assert result.exit_code == 0, result.output
    assert "vllm serve /models/fable-9b-IQ4_XS.gguf" in result.output
    assert "VLLM_SM70_QWEN_GDN_FULL_FORWARD=0" in result.output
    assert "args.tool_call_parser" in result.output and "base.toml" in result.output
    assert "nothing was started" in result.output
    assert not state_dir.exists()


@pytest.mark.parametrize("name", sorted(p.stem for p in SHIPPED_PROFILES.glob("*.toml")))
def test_every_shipped_profile_renders_without_errors(
    name: str, shipped_profiles: Path, state_dir: Path
) -> None:
    report = dry_json(shipped_profiles, state_dir, name)
    assert report["errors"] == [], report["errors"]
    assert report["argv"][2] and "--port" in report["argv"]


def test_fable_27b_capture_sizes_are_rounded_for_mtp(shipped_profiles: Path, state_dir: Path) -> None:
    report = dry_json(shipped_profiles, state_dir, "fable-27b")
    assert '{"method":"mtp","num_speculative_tokens":1}' in report["argv"]
    rounding = [w for w in report["warnings"] if "will capture" in w]
    assert rounding and "[2, 4, 8, 16, 32, 48, 64]" in rounding[0]  # 7 decode graphs, as in the field


def test_spark_chain_and_no_prefix_form(shipped_profiles: Path, state_dir: Path) -> None:
    spark = dry_json(shipped_profiles, state_dir, "spark")
    assert spark["chain"] == ["spark", "spark-no-prefix", "spark-baseline", "base"]
    assert "--enable-prefix-caching" in spark["argv"] and "--enforce-eager" in spark["argv"]
    no_prefix = dry_json(shipped_profiles, state_dir, "spark-no-prefix")
    assert "--no-enable-prefix-caching" in no_prefix["argv"]
    baseline = dry_json(shipped_profiles, state_dir, "spark-baseline")
    assert "--speculative-config" not in baseline["argv"]
    assert baseline["argv"][baseline["argv"].index("--max-model-len") + 1] == "32768"


BAD_ARGS = {
    "wrong_type": ('max_num_seqs = "32"', "takes an integer"),
    "unknown_flag": ("max_num_seq = 32", "did you mean max_num_seqs?"),
    "util_range": ("gpu_memory_utilization = 1.5", "must be in (0, 1]"),
    "log_stats": ("disable_log_stats = true", "gates need"),
    "literal_key": ('api_key = "sk-123"', "api_key_env"),
    "eager_and_sizes": (
        "enforce_eager = true\ncompilation_config = { cudagraph_capture_sizes = [1, 2] }",
        "contradictory",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGS))
def test_invalid_args_exit_2_and_change_nothing(case: str, shipped_profiles: Path, state_dir: Path) -> None:
    body, expected = BAD_ARGS[case]
    (shipped_profiles / "cand.toml").write_text(f'extends = "prod"\n[args]\n{body}\n')
    before = tree_snapshot(shipped_profiles)
    result = dry_run(shipped_profiles, state_dir, "cand")
    assert result.exit_code == 2
    assert expected in result.output
    assert tree_snapshot(shipped_profiles) == before and not state_dir.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('extends = "base"\narg = {}\n', "unknown key; did you mean args?"),
        ('extends = "base"\n[engine]\nport = 70000\nmodel = "m"\n', "engine.port = 70000: must be ≤ 65_535"),
        ('extends = "base"\n[engine]\nmodle = "m"\n', "did you mean model?"),
        (
            'extends = "base"\n[engine]\nmodel = "m"\n[gates.kernel_markr]\npatterns = []\n',
            "did you mean kernel_marker?",
        ),
        ('extends = "base"\n[engine]\nmodel = "m"\n[env]\nVLLM_X = 1.5\n', "environment values are strings"),
    ],
)
def test_invalid_profile_shape(text: str, expected: str, shipped_profiles: Path, state_dir: Path) -> None:
    (shipped_profiles / "cand.toml").write_text(text)
    result = dry_run(shipped_profiles, state_dir, "cand")
    assert result.exit_code == 2 and expected in result.output


def test_missing_profile_and_syntax_error_exit_2(shipped_profiles: Path, state_dir: Path) -> None:
    missing = dry_run(shipped_profiles, state_dir, "prdo")
    assert missing.exit_code == 2 and "profiles there:" in missing.stderr and "prod" in missing.stderr
    (shipped_profiles / "broken.toml").write_text("[args\n")
    broken = dry_run(shipped_profiles, state_dir, "broken")
    assert broken.exit_code == 2 and "broken.toml:1:" in broken.stderr


def test_user_error_never_prints_a_traceback(tmp_path: Path) -> None:
    launch_bin = Path(sys.executable).parent / "launch"
    proc = subprocess.run(
        [str(launch_bin), "--profiles-dir", str(tmp_path), "--state-dir", str(tmp_path / "s"),
         "--profile", "nope", "--dry-run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no profile 'nope'") and "Traceback" not in proc.stderr
    assert not (tmp_path / "s").exists()


def test_diff_against_newest_bak(shipped_profiles: Path, state_dir: Path) -> None:
    prod = shipped_profiles / "prod.toml"
    bak = shipped_profiles / "prod.toml.bak_util"
    bak.write_text(prod.read_text().replace("0.30", "0.90"))
    report = dry_json(shipped_profiles, state_dir, "prod")
    assert report["diff"]["against"] == "prod.toml.bak_util"
    assert report["diff"]["changes"] == [
        {"kind": "changed", "what": "--gpu-memory-utilization", "old": "0.9", "new": "0.3"}
    ]


def test_diff_against_last_promoted_and_kv_pool(shipped_profiles: Path, state_dir: Path) -> None:
    record_dir = state_dir / "profiles" / "prod"
    record_dir.mkdir(parents=True)
    old_argv = [t if t != "32" else "8" for t in PROD_ARGV]
    record = {"argv": old_argv, "env": {}, "fingerprint": "abc", "promoted_at": "2026-08-06T10:00:00Z"}
    (record_dir / "last_good.json").write_text(json.dumps(record))
    (record_dir / "last_facts.json").write_text(json.dumps({"kv_cache_tokens": 4319677}))
    result = dry_run(shipped_profiles, state_dir, "prod")
    assert "- --max-num-seqs 8" in result.output and "+ --max-num-seqs 32" in result.output
    assert "+ env VLLM_SM70_QWEN_GDN_FULL_FORWARD 0" in result.output
    assert "KV pool 4,319,677 tokens (last run) = 2.1× what 32 full-length requests need" in result.output


def test_a_kv_pool_below_one_times_warns_and_its_json_has_numbers(
    shipped_profiles: Path, state_dir: Path
) -> None:
    record_dir = state_dir / "profiles" / "prod"
    record_dir.mkdir(parents=True)
    (record_dir / "last_facts.json").write_text(json.dumps({"kv_cache_tokens": 1_677_721}))
    result = dry_run(shipped_profiles, state_dir, "prod")
    assert "= 0.8× what 32 full-length requests need (65,536 tokens each)" in result.output
    assert (
        "warning: the KV pool holds only 25 of max_num_seqs 32 requests at max_model_len 65,536"
        in result.output
    )
    report = dry_json(shipped_profiles, state_dir, "prod")
    pool = report["kv_pool"]
    assert pool["pool_tokens"] == 1_677_721 and pool["need_tokens"] == 32 * 65_536
    assert pool["max_model_len"] == 65_536 and pool["max_num_seqs"] == 32
    assert pool["ratio"] == pytest.approx(0.8, abs=0.001) and pool["full_length_requests"] == 25
    assert pool["warning"] in report["warnings"]


def test_a_kv_pool_at_or_above_one_times_has_no_warning(shipped_profiles: Path, state_dir: Path) -> None:
    record_dir = state_dir / "profiles" / "prod"
    record_dir.mkdir(parents=True)
    (record_dir / "last_facts.json").write_text(json.dumps({"kv_cache_tokens": 32 * 65_536}))
    report = dry_json(shipped_profiles, state_dir, "prod")
    assert report["kv_pool"]["ratio"] == 1.0 and report["kv_pool"]["warning"] is None
    assert not any("KV pool" in w for w in report["warnings"])


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('wake_timeout_s = "x"', "supervisor.wake_timeout_s = 'x': expected int or float"),
        ('beside_margin_gib = "x"', "supervisor.beside_margin_gib = 'x': expected int or float"),
        ('trial = "sideways"', "supervisor.trial = 'sideways': must be one of instead, beside"),
        ("power_limit_w = -3", "supervisor.power_limit_w = -3: must be ≥ 1"),
    ],
)
def test_a_supervisor_value_of_the_wrong_type_is_an_error_not_a_bug_report(
    line: str, expected: str, shipped_profiles: Path, state_dir: Path
) -> None:
    """The dry run's park and trial lines read `[supervisor]`: only a plan without errors (a wrong
    type there was a ValueError, exit 70, and a bug report in the state dir)."""
    (shipped_profiles / "cand.toml").write_text(f'extends = "prod"\n[supervisor]\n{line}\n')
    before = tree_snapshot(shipped_profiles)
    result = dry_run(shipped_profiles, state_dir, "cand")
    assert result.exit_code == 2 and expected in result.output, result.output
    assert tree_snapshot(shipped_profiles) == before and not state_dir.exists()
