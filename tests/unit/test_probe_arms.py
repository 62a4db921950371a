"""Arms: `NAME:KEY=VALUE` parsed, applied to the production profile in memory, and diffed against it."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.errors import BadInput, ProfileInvalid
from launcher.probe.arms import ArmSpec, build_arms, parse_arm_specs
from tests.conftest import tree_snapshot

BASE = """\
abstract = true
[engine]
model = "/models/fable-9b"
served_model_name = "fable-9b"
port = 8000
[args]
max-num-seqs = 8
gpu_memory_utilization = 0.90
max_model_len = 65536
"""
PROD = """\
extends = "base"
[args]
tensor_parallel_size = 4   # four V100s
[env]
VLLM_SM70_QWEN_GDN_FULL_FORWARD = "1"
"""


@pytest.fixture
def profiles(profiles_dir: Path) -> Path:
    (profiles_dir / "base.toml").write_text(BASE)
    (profiles_dir / "prod.toml").write_text(PROD)
    return profiles_dir


def test_specs_keep_order_and_merge_keys_given_under_one_name() -> None:
    specs = parse_arm_specs(
        ["util030:gpu_memory_utilization=0.30", "gdn0:env.X=0", "util030:max_num_seqs=16"], "prod"
    )
    assert specs == [
        ArmSpec("util030", ("gpu_memory_utilization=0.30", "max_num_seqs=16")),
        ArmSpec("gdn0", ("env.X=0",)),
    ]
    # a value may hold ':' — only the first one separates the name
    assert parse_arm_specs(["m:engine.model=/models/a:b"], "prod")[0].assignments == (
        "engine.model=/models/a:b",
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("util030", "no KEY=VALUE"),
        ("util030:", "no KEY=VALUE"),
        ("bad name:max_num_seqs=8", "is not an arm name"),
        ("prod:max_num_seqs=8", "is arm 0, production as it serves"),
    ],
)
def test_bad_specs_are_refused_with_a_hint(given: str, says: str) -> None:
    with pytest.raises(BadInput) as err:
        parse_arm_specs([given], "prod")
    assert says in err.value.message and err.value.hint


def test_arms_change_only_their_keys_and_never_the_operators_files(profiles: Path) -> None:
    before = tree_snapshot(profiles)
    specs = parse_arm_specs(
        [
            "util030:gpu_memory_utilization=0.30",
            "gdn0:env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0",
            "seqs:max-num-seqs=32",
        ],
        "prod",
    )
    prod, util, gdn, seqs = build_arms(profiles, "prod", specs)
    assert tree_snapshot(profiles) == before
    assert prod.is_production and prod.changes == () and prod.describe_keys() == "production as it serves"
    assert [(c.what, c.old, c.new) for c in util.changes] == [("--gpu-memory-utilization", "0.9", "0.3")]
    assert [(c.what, c.old, c.new) for c in gdn.changes] == [
        ("env VLLM_SM70_QWEN_GDN_FULL_FORWARD", "1", "0")
    ]
    # `max-num-seqs` is spelled as the parent spells it, so the arm overrides instead of adding a twin
    assert [(c.what, c.old, c.new) for c in seqs.changes] == [("--max-num-seqs", "8", "32")]
    assert util.plan.argv[:3] == prod.plan.argv[:3] and util.plan.fingerprint() != prod.plan.fingerprint()
    assert [a.index for a in (prod, util, gdn, seqs)] == [0, 1, 2, 3]


def test_an_arm_that_changes_nothing_is_refused(profiles: Path) -> None:
    with pytest.raises(BadInput) as err:
        build_arms(profiles, "prod", parse_arm_specs(["same:max_num_seqs=8"], "prod"))
    assert "starts exactly what production starts" in err.value.message


def test_an_arm_that_does_not_render_names_the_arm_and_writes_nothing(profiles: Path) -> None:
    before = tree_snapshot(profiles)
    with pytest.raises(ProfileInvalid) as err:
        build_arms(profiles, "prod", parse_arm_specs(["typo:max_num_seq=16"], "prod"))
    assert "arm 'typo'" in err.value.message
    assert any("max_num_seq" in p for p in err.value.problems)
    assert "vllm-gate-arm-" not in " ".join(err.value.problems)  # messages speak of the real file
    assert tree_snapshot(profiles) == before


@pytest.mark.parametrize(
    "name",
    [
        "",  # `:max_num_seqs=8`
        ".hidden",  # must start with a letter or digit: it names a directory of results
        "-rf",
        "a" * 41,
        "util/030",  # a path separator
        "../up",
        "util 030",
        "ütil",  # ASCII only
        "a$(id)",
        "tab\tname",
    ],
)
def test_hostile_arm_names_are_refused_before_anything_is_read(name: str) -> None:
    with pytest.raises(BadInput, match="is not an arm name") as err:
        parse_arm_specs([f"{name}:max_num_seqs=8"], "prod")
    assert err.value.hint is not None and "NAME:KEY=VALUE" in err.value.hint


@pytest.mark.parametrize("name", ["a" * 40, "u", "0", "util-0.30_b", "A.B"])
def test_arm_names_up_to_forty_safe_characters_are_accepted(name: str) -> None:
    assert parse_arm_specs([f"{name}:max_num_seqs=8"], "prod") == [ArmSpec(name, ("max_num_seqs=8",))]


def test_blanks_around_the_name_and_the_assignment_are_dropped() -> None:
    assert parse_arm_specs(["  seqs :  max_num_seqs=16  "], "prod") == [ArmSpec("seqs", ("max_num_seqs=16",))]


@pytest.mark.parametrize("given", ["seqs:   ", ":", "", "   "])
def test_an_assignment_of_only_blanks_is_no_assignment(given: str) -> None:
    with pytest.raises(BadInput, match="has no KEY=VALUE"):
        parse_arm_specs([given], "prod")


def test_the_production_name_is_refused_even_as_a_second_spec() -> None:
    with pytest.raises(BadInput, match="is arm 0"):
        parse_arm_specs(["ok:max_num_seqs=8", "prod:max_num_seqs=16"], "prod")
    # a name that only contains the production name is another arm
    assert [s.name for s in parse_arm_specs(["prod2:max_num_seqs=8"], "prod")] == ["prod2"]


def test_no_arms_given_is_no_specs() -> None:
    assert parse_arm_specs([], "prod") == []


def test_an_arm_that_changes_two_keys_shows_both_changes(profiles: Path) -> None:
    specs = parse_arm_specs(["both:max_num_seqs=16", "both:env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0"], "prod")
    _, both = build_arms(profiles, "prod", specs)
    assert both.describe_keys() == "max_num_seqs=16 env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0"
    assert sorted(c.what for c in both.changes) == ["--max-num-seqs", "env VLLM_SM70_QWEN_GDN_FULL_FORWARD"]
