"""Two small decisions the dry run, `set`, `rollback --list` and the probe print: what changed between
two launches, flag by flag (launcher/profile/diff.py), and how many full-length requests the last
run's KV pool holds (launcher/profile/kvpool.py)."""

from __future__ import annotations

import pytest

from launcher.profile.diff import Change, diff_launches, flag_groups
from launcher.profile.kvpool import KvPool, kv_pool

SERVE = ["vllm", "serve", "org/model"]


# ---- flag groups ----------------------------------------------------------------------------------


def test_argv_is_grouped_by_flag_with_the_program_and_model_as_the_command() -> None:
    groups = flag_groups([*SERVE, "--max-num-seqs", "32", "--enforce-eager", "--port", "8000"])
    assert groups == {
        "<command>": "vllm serve org/model",
        "--max-num-seqs": "32",
        "--enforce-eager": "",
        "--port": "8000",
    }


def test_negative_numbers_are_values_and_short_options_are_flags() -> None:
    groups = flag_groups([*SERVE, "--seed", "-1", "--offset", "-0.5", "-O3", "-tp", "2"])
    assert groups["--seed"] == "-1" and groups["--offset"] == "-0.5"
    assert groups["-O3"] == "" and groups["-tp"] == "2"
    assert groups["<command>"] == "vllm serve org/model"


def test_a_flag_of_several_values_keeps_them_in_order_shell_quoted() -> None:
    groups = flag_groups([*SERVE, "--served-model-name", "a b", "c", "--override", '{"k": 1}'])
    assert groups["--served-model-name"] == "'a b' c"
    assert groups["--override"] == "'{\"k\": 1}'"


def test_the_order_of_flags_does_not_matter() -> None:
    one = flag_groups([*SERVE, "--a", "1", "--b", "2"])
    other = flag_groups([*SERVE, "--b", "2", "--a", "1"])
    assert one == other


def test_a_lone_dash_is_a_value_not_a_flag() -> None:
    assert flag_groups(["prog", "--input", "-"])["--input"] == "-"


# ---- launches diffed ----------------------------------------------------------------------------


def test_identical_launches_differ_in_nothing() -> None:
    old = [*SERVE, "--max-num-seqs", "32", "--enforce-eager"]
    new = [*SERVE, "--enforce-eager", "--max-num-seqs", "32"]
    assert diff_launches(old, {"A": "1"}, new, {"A": "1"}) == []


def test_each_flag_is_added_removed_or_changed_in_flag_order() -> None:
    old = [*SERVE, "--max-num-seqs", "32", "--enforce-eager", "--block-size", "16"]
    new = [*SERVE, "--max-num-seqs", "8", "--block-size", "16", "--kv-cache-dtype", "fp8"]
    assert diff_launches(old, {}, new, {}) == [
        Change("removed", "--enforce-eager", "", None),
        Change("added", "--kv-cache-dtype", None, "fp8"),
        Change("changed", "--max-num-seqs", "32", "8"),
    ]


def test_a_changed_model_is_a_change_of_the_command() -> None:
    (change,) = diff_launches([*SERVE, "--port", "1"], {}, ["vllm", "serve", "org/other", "--port", "1"], {})
    assert change == Change("changed", "<command>", "vllm serve org/model", "vllm serve org/other")


def test_environment_changes_come_after_the_flags_and_are_named_as_variables() -> None:
    changes = diff_launches(
        SERVE, {"VLLM_A": "1", "VLLM_B": "x"}, [*SERVE, "--x", "1"], {"VLLM_A": "2", "VLLM_C": "y"}
    )
    assert [(c.kind, c.what) for c in changes] == [
        ("added", "--x"),
        ("changed", "env VLLM_A"),
        ("removed", "env VLLM_B"),
        ("added", "env VLLM_C"),
    ]


def test_secrets_are_masked_in_the_diff_yet_a_changed_key_still_shows_a_change_of_presence() -> None:
    old = [*SERVE, "--api-key", "sk-old-secret"]
    new = [*SERVE, "--api-key=sk-new-secret"]
    changes = diff_launches(old, {"HF_TOKEN": "hf_old"}, new, {"HF_TOKEN": "hf_new"})
    printed = "\n".join(line for c in changes for line in c.lines())
    assert "sk-old-secret" not in printed and "sk-new-secret" not in printed and "hf_" not in printed
    assert printed.splitlines() == ["- --api-key '***'", "+ --api-key=***"]  # shell-quoted, as shown
    unchanged_secret = diff_launches(SERVE, {"HF_TOKEN": "hf_a"}, SERVE, {"HF_TOKEN": "hf_b"})
    assert unchanged_secret == [], "two masked values look alike: a rotated token is no change of launch"


def test_a_change_prints_as_minus_and_plus_lines_without_trailing_space() -> None:
    assert Change("changed", "--max-num-seqs", "32", "8").lines() == [
        "- --max-num-seqs 32",
        "+ --max-num-seqs 8",
    ]
    assert Change("added", "--enforce-eager", None, "").lines() == ["+ --enforce-eager"]
    assert Change("removed", "env VLLM_X", "1", None).lines() == ["- env VLLM_X 1"]
    assert Change("added", "--x", None, "1").to_json() == {
        "kind": "added",
        "what": "--x",
        "old": None,
        "new": "1",
    }


# ---- the KV pool --------------------------------------------------------------------------------


def pool(tokens: int, args: dict[str, object], facts: dict[str, object] | None = None) -> KvPool:
    found = kv_pool(args, {"kv_cache_tokens": tokens, **(facts or {})})
    assert found is not None
    return found


def test_the_ratio_is_the_pool_over_max_model_len_times_max_num_seqs() -> None:
    """prod's last run (tests/data): 17,794,448 tokens for 8 requests of 65,536 = 33.9×."""
    found = pool(17_794_448, {"max_model_len": 65536, "max_num_seqs": 8})
    assert found.need_tokens == 524_288
    assert found.ratio == pytest.approx(33.94, abs=0.01)
    assert found.full_length_requests == 271
    assert found.line() == (
        "KV pool 17,794,448 tokens (last run) = 33.9× what 8 full-length requests need (65,536 tokens each)"
    )
    assert found.warning is None


def test_exactly_enough_is_no_warning_and_one_token_less_is() -> None:
    enough = pool(4 * 8192, {"max_model_len": 8192, "max_num_seqs": 4})
    assert enough.ratio == 1.0 and enough.warning is None
    short = pool(4 * 8192 - 1, {"max_model_len": 8192, "max_num_seqs": 4})
    assert short.warning is not None
    assert short.warning.startswith(
        "the KV pool holds only 3 of max_num_seqs 4 requests at max_model_len 8,192"
    )
    assert "(1.00×)" in short.warning, "two decimals: 0.99997 shows as 1.00, the count says 3"


def test_a_pool_below_one_request_says_it_holds_none() -> None:
    found = pool(4000, {"max_model_len": 8192, "max_num_seqs": 16})
    assert found.full_length_requests == 0 and found.ratio == pytest.approx(4000 / (8192 * 16))
    assert found.warning is not None and "holds only 0 of max_num_seqs 16" in found.warning
    assert found.warning.endswith("raise gpu_memory_utilization, or lower max_num_seqs or max_model_len")


def test_sizes_are_read_as_vllm_reads_them_whatever_the_spelling() -> None:
    found = pool(65536, {"max-model-len": "32k", "max-num-seqs": 2})
    assert (found.max_model_len, found.max_num_seqs) == (32000, 2)
    assert pool(65536, {"max_model_len": "32K", "max_num_seqs": 2}).max_model_len == 32768


def test_without_max_model_len_in_the_profile_the_logged_one_is_used() -> None:
    facts: dict[str, object] = {"max_concurrency": {"max_model_len": 40960, "concurrency": 3.2}}
    found = pool(131072, {"max_num_seqs": 4}, facts)
    assert found.max_model_len == 40960 and found.full_length_requests == 3
    assert pool(131072, {"max_model_len": 1024, "max_num_seqs": 4}, facts).max_model_len == 1024, (
        "the profile's own value wins over the last run's"
    )


def test_an_unknown_side_gives_the_pool_alone_and_judges_nothing() -> None:
    no_seqs = pool(131072, {"max_model_len": 4096})
    assert no_seqs.ratio is None and no_seqs.warning is None and no_seqs.full_length_requests == 32
    assert no_seqs.line() == "KV pool 131,072 tokens (last run); max_model_len × max_num_seqs unknown here"
    no_len = pool(131072, {"max_num_seqs": 4}, {"max_concurrency": "not a table"})
    assert (no_len.max_model_len, no_len.full_length_requests, no_len.ratio) == (None, None, None)


@pytest.mark.parametrize("facts", [None, {}, {"kv_cache_tokens": None}, {"kv_cache_tokens": "123"}])
def test_no_logged_pool_is_no_report(facts: dict[str, object] | None) -> None:
    assert kv_pool({"max_model_len": 4096, "max_num_seqs": 4}, facts) is None


def test_the_json_carries_the_figures_and_the_same_text_and_warning() -> None:
    found = pool(1000, {"max_model_len": 500, "max_num_seqs": 4})
    report = found.as_json()
    assert report == {
        "pool_tokens": 1000,
        "max_model_len": 500,
        "max_num_seqs": 4,
        "need_tokens": 2000,
        "ratio": 0.5,
        "full_length_requests": 2,
        "source": "last run",
        "text": found.line(),
        "warning": found.warning,
    }
    assert report["warning"] is not None
