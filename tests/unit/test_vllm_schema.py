"""The committed `vllm serve` schema: rebuilt from its raw dump byte for byte, and true to vLLM 0.33.0.

The raw dump was read from the real vLLM 0.33.0 parser (docs/decisions/0002); these tests need no vLLM,
except the last, which is skipped where vLLM does not import.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from vllm_flags import schema, schema_extract

DATA = REPO / "vllm_flags" / "data"
RAW = DATA / "vllm-0.33.0-parser-raw.json"
SNAPSHOT = DATA / schema.SNAPSHOT_NAME


@pytest.fixture(scope="module")
def raw() -> dict[str, object]:
    data: dict[str, object] = json.loads(RAW.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def snap() -> schema.VllmSchema:
    return schema.load_snapshot()


def test_snapshot_is_exactly_the_normalized_raw_dump(raw: dict[str, object]) -> None:
    assert schema_extract.dumps(schema_extract.normalize(raw)) == SNAPSHOT.read_text(encoding="utf-8")


def test_generator_rebuilds_the_snapshot_from_the_raw_dump_without_vllm() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen-vllm-schema"), "--from-raw", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "485 option strings" in done.stdout


def test_raw_dump_is_from_the_real_vllm_0_33_0_wheel(raw: dict[str, object]) -> None:
    assert raw["vllm_version"] == "0.33.0"
    assert raw["builder"] == "vllm.entrypoints.common.cli_args.make_arg_parser"
    assert raw["wheel"] == {
        "filename": "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "sha256": "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa",
    }


def test_every_parser_option_string_is_kept(raw: dict[str, object], snap: schema.VllmSchema) -> None:
    assert isinstance(raw["actions"], dict)
    assert len(raw["actions"]) == 485
    assert set(snap.options) == set(raw["actions"])
    assert snap.vllm_version == "0.33.0"


@pytest.mark.parametrize(
    ("option", "kind", "type_", "nargs"),
    [
        ("--max-num-seqs", "value", "int", None),
        ("--gpu-memory-utilization", "value", "float", None),
        ("--device-memory-utilization", "value", "float", None),
        ("--max-num-batched-tokens", "value", "human_int", None),
        ("--max-model-len", "value", "human_int", None),
        ("--kv-cache-dtype", "value", "str", None),
        ("--compilation-config", "value", "json", None),
        ("-cc", "value", "json", None),
        ("--speculative-config", "value", "json", None),
        ("--cudagraph-capture-sizes", "value", "int", "+"),
        ("--served-model-name", "value", "str", "+"),
        ("--api-key", "value", "str", "+"),
        ("--tool-call-parser", "value", "str", None),
        ("--reasoning-parser", "value", "str", None),
        ("--hf-overrides", "value", "json", None),
        ("--device-ids", "value", "other", None),
        ("--disable-log-stats", "flag", None, None),
        ("--enforce-eager", "flag", None, None),
    ],
)
def test_option_shapes_match_facts(
    snap: schema.VllmSchema, option: str, kind: str, type_: str | None, nargs: str | None
) -> None:
    spec = snap.options[option]
    assert (spec.kind, spec.type, spec.nargs) == (kind, type_, nargs)


def test_aliases_share_their_dest(snap: schema.VllmSchema) -> None:
    assert snap.options["--device-memory-utilization"].dest == "gpu_memory_utilization"
    assert snap.options["-tp"].dest == snap.options["--tensor-parallel-size"].dest


def test_kv_cache_dtype_takes_any_string(snap: schema.VllmSchema) -> None:
    # Literal plus str in vLLM 0.33.0: a metavar, no argparse choices; pydantic checks later.
    assert snap.options["--kv-cache-dtype"].choices is None


def test_values_vllm_lists_only_in_a_metavar_are_kept(snap: schema.VllmSchema) -> None:
    """vllm-facts.md §9.1: the `{auto,bfloat16,fp8,...}` of `--help`, which argparse does not enforce."""
    listed = {o.option: o.metavar_choices for o in snap.options.values() if o.metavar_choices}
    assert sorted(listed) == [
        "--config-format",
        "--distributed-executor-backend",
        "--kv-cache-dtype",
        "--model-impl",
        "--tokenizer-mode",
    ]
    kv = listed["--kv-cache-dtype"]
    assert kv is not None and {"auto", "fp8", "fp8_e4m3", "nvfp4"} <= set(kv) and "fp9" not in kv
    assert listed["--distributed-executor-backend"] == ("external_launcher", "mp", "ray", "uni", "None")
    assert snap.options["--tool-call-parser"].metavar_choices is None  # one word `{a,b}`: not a list


@pytest.mark.parametrize(
    ("action", "listed"),
    [
        ({"metavar": ["b", "a"], "choices": None, "type": "str"}, ["b", "a"]),
        (
            {"metavar": ["mp"], "choices": None, "type": "m.optional_type.<locals>._optional_type(str)"},
            ["mp", "None"],
        ),
        ({"metavar": ["a"], "choices": ["a"], "type": "str"}, None),  # real choices: argparse checks
        ({"metavar": "{a,b}", "choices": None, "type": "str"}, None),
        ({"metavar": "FILE", "choices": None, "type": "str"}, None),
        ({"metavar": None, "choices": None, "type": None}, None),
    ],
)
def test_metavar_choices_are_read_from_a_list_metavar_only(
    action: dict[str, object], listed: list[str] | None
) -> None:
    assert schema_extract.metavar_choices(action) == listed


def test_literal_options_carry_their_choices(snap: schema.VllmSchema) -> None:
    assert snap.options["--performance-mode"].choices == ("balanced", "interactivity", "throughput")


@pytest.mark.parametrize(
    ("on", "off"),
    [
        ("--enable-prefix-caching", "--no-enable-prefix-caching"),
        ("--enforce-eager", "--no-enforce-eager"),
        ("--enable-log-requests", "--no-enable-log-requests"),
    ],
)
def test_flags_and_their_negations(snap: schema.VllmSchema, on: str, off: str) -> None:
    flag, negation = snap.options[on], snap.options[off]
    assert (flag.kind, flag.sets) == ("flag", True)
    assert (negation.kind, negation.sets, negation.dest) == ("flag", False, flag.dest)
    assert snap.negation_of(flag) == negation


def test_enable_disable_pairs_store_false_for_disable(snap: schema.VllmSchema) -> None:
    # EnableDisableAction (0.33.0): --disable-x is the inverse of a --enable-x field.
    assert snap.options["--disable-prefix-caching"].sets is False
    assert snap.options["--disable-log-requests"].sets is False
    assert snap.options["--disable-log-requests"].dest == "enable_log_requests"


def test_disable_log_stats_is_a_plain_flag(snap: schema.VllmSchema) -> None:
    spec = snap.options["--disable-log-stats"]
    assert (spec.dest, spec.sets) == ("disable_log_stats", True)
    assert snap.negation_of(spec) is None


def test_help_is_kept_as_a_flag_that_sets_nothing(snap: schema.VllmSchema) -> None:
    assert (snap.options["--help"].kind, snap.options["--help"].sets) == ("flag", None)
    assert snap.negation_of(snap.options["--help"]) is None


def test_removed_and_rewritten_options_are_absent(snap: schema.VllmSchema) -> None:
    assert "--cuda-graph-sizes" not in snap.options
    assert "-O" not in snap.options  # FlexibleArgumentParser rewrites -O3 before argparse sees it


def test_env_vars(snap: schema.VllmSchema) -> None:
    assert {"VLLM_USE_V2_MODEL_RUNNER", "VLLM_PROCESS_NAME_PREFIX"} <= snap.env_vars
    assert "VLLM_USE_V1" not in snap.env_vars
    assert "VLLM_ATTENTION_BACKEND" not in snap.env_vars
    assert len(snap.env_vars) == 318


def test_suggest_and_key_lookup(snap: schema.VllmSchema) -> None:
    assert snap.suggest("max_num_seq") == "max_num_seqs"
    assert snap.option_for_key("max_num_seqs") is snap.options["--max-num-seqs"]


@pytest.mark.parametrize(
    ("type_name", "kind"),
    [
        (None, "str"),
        ("int", "int"),
        ("vllm.engine.arg_utils.optional_type.<locals>._optional_type(float)", "float"),
        ("vllm.engine.arg_utils.parse_type.<locals>._parse_type(json.loads)", "json"),
        (
            "vllm.engine.arg_utils.optional_type.<locals>._optional_type("
            "vllm.engine.arg_utils.parse_type.<locals>._parse_type(json.loads))",
            "json",
        ),
        ("vllm.engine.arg_utils._compute_kwargs.<locals>.parse_dataclass(vllm.config.X)", "json"),
        ("vllm.utils.argparse_utils.human_readable_int_or_auto", "human_int"),
        ("vllm.engine.arg_utils.union_dict_and_str", "json"),
        ("vllm.engine.arg_utils.EngineArgs.add_cli_args.<locals>.<lambda>", "other"),
        ("fork.parsers.parse_point", "other"),
    ],
)
def test_type_kind(type_name: str | None, kind: str) -> None:
    assert schema_extract.type_kind(type_name) == kind


def test_installed_vllm_matches_the_snapshot(snap: schema.VllmSchema) -> None:
    vllm = pytest.importorskip("vllm")
    if vllm.__version__ != snap.vllm_version:
        pytest.skip(f"installed vllm {vllm.__version__} is not the snapshot's {snap.vllm_version}")
    fresh = schema_extract.schema_from_installed_vllm()
    assert set(fresh["options"]) == set(snap.options)
    assert fresh["options"] == json.loads(SNAPSHOT.read_text(encoding="utf-8"))["options"]
