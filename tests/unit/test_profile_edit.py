"""The pure profile edits behind `launch set`: addressing, values, and layout kept line for line."""

from __future__ import annotations

import difflib
import os
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from launcher.errors import BadInput
from launcher.profile.edit import apply_assignments, format_value, match_spelling, parse_assignment
from launcher.profile.snapshots import (
    available_tags,
    bak_path,
    check_tag,
    prune_replaced,
    replaced_path,
    restore_snapshot,
    save_and_write,
    save_snapshot,
)
from tests.conftest import SHIPPED_PROFILES


def edit(text: str, *given: str) -> str:
    return apply_assignments(text, [parse_assignment(g) for g in given])


def changed_lines(before: str, after: str) -> list[str]:
    """Only the lines that differ: '-old' / '+new'."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


# ---- addressing and values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "path", "value"),
    [
        ("max_num_seqs=16", ("args", "max_num_seqs"), 16),
        ("gpu_memory_utilization=0.3", ("args", "gpu_memory_utilization"), 0.3),
        ("enforce_eager=true", ("args", "enforce_eager"), True),
        (
            "compilation_config.cudagraph_capture_sizes=[1,2,4]",
            ("args", "compilation_config", "cudagraph_capture_sizes"),
            [1, 2, 4],
        ),
        ('speculative_config={method="mtp"}', ("args", "speculative_config"), {"method": "mtp"}),
        ('tool_call_parser="hermes"', ("args", "tool_call_parser"), "hermes"),
        ("tool_call_parser=hermez", ("args", "tool_call_parser"), "hermez"),
        ("engine.model=/models/x-IQ4_XS.gguf", ("engine", "model"), "/models/x-IQ4_XS.gguf"),
        ('env.VLLM_SM70_QWEN_GDN_FULL_FORWARD="1"', ("env", "VLLM_SM70_QWEN_GDN_FULL_FORWARD"), "1"),
        ("env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0", ("env", "VLLM_SM70_QWEN_GDN_FULL_FORWARD"), "0"),
        ("env.VLLM_X=true", ("env", "VLLM_X"), "true"),
        ("engine.port=8001", ("engine", "port"), 8001),
        ('gates.kernel_marker.patterns=["X_READY"]', ("gates", "kernel_marker", "patterns"), ["X_READY"]),
        ("args.max-num-seqs=8", ("args", "max-num-seqs"), 8),
        ("kv_cache_dtype=turboquant_2bit_nc", ("args", "kv_cache_dtype"), "turboquant_2bit_nc"),
        ('description_ok=""', ("args", "description_ok"), ""),
    ],
)
def test_addresses_and_values(given: str, path: tuple[str, ...], value: object) -> None:
    item = parse_assignment(given)
    assert item.path == path
    assert item.value == value and type(item.value) is type(value)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("max_num_seqs", "is not key=value"),
        ("=16", "is not key=value"),
        ("max_num_seqs=", "no value after '='"),
        ("max num seqs=1", "is not a key"),
        ("args..x=1", "is not a key"),
        ("env=1", "[env] is a table"),
        ("compilation_config.cudagraph_capture_sizes=[1,2", "is not a TOML value"),
        ("description=two words", "is not a TOML value"),
        ('speculative_config={method="mtp"', "is not a TOML value"),
    ],
)
def test_bad_assignments_say_why(given: str, says: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_assignment(given)
    assert says in str(caught.value)
    assert caught.value.exit_code == 2


def test_values_are_written_in_the_shipped_style() -> None:
    assert format_value([1, 2, 4]) == "[1, 2, 4]"
    assert (
        format_value({"method": "mtp", "num_speculative_tokens": 2})
        == '{ method = "mtp", num_speculative_tokens = 2 }'
    )
    assert format_value(0.3) == "0.3" and format_value(True) == "true" and format_value("a b") == '"a b"'
    assert format_value({"a.b": {}}) == '{ "a.b" = {} }'


# ---- edits keep the file ----------------------------------------------------------------------


def test_changing_a_value_changes_one_line_and_keeps_its_comment() -> None:
    prod = (SHIPPED_PROFILES / "prod.toml").read_text()
    after = edit(prod, "max_num_seqs=16")
    assert changed_lines(prod, after) == [
        "-max_num_seqs = 32                          # 8 → 32: c32 total 227 → 619 tok/s, c1–c8 unchanged",
        "+max_num_seqs = 16                          # 8 → 32: c32 total 227 → 619 tok/s, c1–c8 unchanged",
    ]


def test_editing_inside_an_inline_table_keeps_it_inline() -> None:
    prod = (SHIPPED_PROFILES / "prod.toml").read_text()
    after = edit(prod, "compilation_config.cudagraph_capture_sizes=[1,2,4]")
    assert changed_lines(prod, after) == [
        "-compilation_config = { cudagraph_capture_sizes = [1, 2, 4, 8] }",
        "+compilation_config = { cudagraph_capture_sizes = [1, 2, 4] }",
    ]
    added = edit(prod, "compilation_config.max_capture_size=8")
    assert changed_lines(prod, added)[1] == (
        "+compilation_config = { cudagraph_capture_sizes = [1, 2, 4, 8], max_capture_size = 8 }"
    )


def test_new_keys_go_into_their_table_before_the_blank_line() -> None:
    prod = (SHIPPED_PROFILES / "prod.toml").read_text()
    after = edit(prod, "enforce_eager=true", 'env.VLLM_X="1"', "engine.port=8001")
    lines = after.splitlines()
    assert lines[lines.index('served_model_name = "fable-9b"') + 1] == "port = 8001"
    assert lines[lines.index("compilation_config = { cudagraph_capture_sizes = [1, 2, 4, 8] }") + 1] == (
        "enforce_eager = true"
    )
    assert lines[-1] == 'VLLM_X = "1"'
    assert len(changed_lines(prod, after)) == 3  # three additions, nothing else moved
    assert "[engine]\n" in after and "\n\n[args]\n" in after and "\n\n[env]\n" in after


def test_missing_tables_are_created_as_headers() -> None:
    spark = (SHIPPED_PROFILES / "spark.toml").read_text()
    after = edit(
        spark, 'env.A="1"', 'gates.kernel_marker.patterns=["READY"]', "gates.kernel_marker.timeout_s=30"
    )
    assert after.startswith(spark)
    assert (
        after[len(spark) :]
        == '\n[env]\nA = "1"\n\n[gates.kernel_marker]\npatterns = ["READY"]\ntimeout_s = 30\n'
    )


def test_a_parent_key_is_overridden_in_this_file() -> None:
    """spark inherits speculative_config from spark-no-prefix: the child gets a partial inline table,
    which the loader merges key by key with the parent's."""
    spark = (SHIPPED_PROFILES / "spark.toml").read_text()
    after = edit(spark, "speculative_config.num_speculative_tokens=1", "tool_call_parser=hermez")
    assert tomllib.loads(after)["args"] == {
        "enable_prefix_caching": True,
        "speculative_config": {"num_speculative_tokens": 1},
        "tool_call_parser": "hermez",
    }
    assert "speculative_config = { num_speculative_tokens = 1 }" in after


def test_odd_layouts_are_edited_where_they_are() -> None:
    text = (
        "# top comment\n"
        "[args]\r\n"
        "max_num_seqs=32#tight\r\n"
        "  gpu_memory_utilization   =   0.30   # aligned\r\n"
        "x.y = 1 # dotted\r\n"
        "\r\n"
        "[args.compilation_config]\r\n"
        "cudagraph_capture_sizes = [1,2]\r\n"
    ).replace("# top comment\n", "# top comment\r\n")
    after = edit(
        text,
        "max_num_seqs=16",
        "gpu_memory_utilization=0.5",
        "x.y=2",
        "compilation_config.cudagraph_capture_sizes=[4]",
    )
    assert after == (
        "# top comment\r\n"
        "[args]\r\n"
        "max_num_seqs=16#tight\r\n"
        "  gpu_memory_utilization   =   0.5   # aligned\r\n"
        "x.y = 2 # dotted\r\n"
        "\r\n"
        "[args.compilation_config]\r\n"
        "cudagraph_capture_sizes = [4]\r\n"
    )


def test_a_flag_keeps_the_spelling_the_profile_already_uses() -> None:
    items = [
        parse_assignment("max-num-seqs=8"),
        parse_assignment("compilation-config.x=1"),
        parse_assignment("env.A-B=1"),
    ]
    matched = match_spelling(items, ["max_num_seqs", "compilation_config", "block-size"])
    assert [m.path for m in matched] == [
        ("args", "max_num_seqs"),
        ("args", "compilation_config", "x"),
        ("env", "A-B"),
    ]
    prod = (SHIPPED_PROFILES / "prod.toml").read_text()
    assert (
        len(changed_lines(prod, apply_assignments(prod, matched[:1]))) == 2
    )  # one line replaced, none added


def test_a_value_cannot_be_entered_as_a_table() -> None:
    prod = (SHIPPED_PROFILES / "prod.toml").read_text()
    with pytest.raises(BadInput, match=r"args.max_num_seqs is a value in this profile, not a table"):
        edit(prod, "max_num_seqs.x=1")
    with pytest.raises(BadInput, match="given twice"):
        edit(prod, "max_num_seqs=1", "max_num_seqs=2")


def test_every_edit_matches_the_same_edit_on_plain_data() -> None:
    fable = (SHIPPED_PROFILES / "fable-27b.toml").read_text()
    given = [
        "speculative_config.num_speculative_tokens=2",
        "speculative_config.draft={a=1}",
        "block_size=16",
        "gates.kernel_marker.timeout_s=30",
        "gates.health.timeout_s=5",
        "supervisor.stop_grace_s=10",
    ]
    after = edit(fable, *given)
    data = tomllib.loads(after)
    assert data["args"]["speculative_config"] == {
        "method": "mtp",
        "num_speculative_tokens": 2,
        "draft": {"a": 1},
    }
    assert data["gates"] == {
        "kernel_marker": {"patterns": ["IQ4XS_BMMVQ_READY"], "timeout_s": 30},
        "health": {"timeout_s": 5},
    }
    assert data["supervisor"] == {"stop_grace_s": 10}
    assert "# The patched kernel prints this once it really runs" in after


# ---- snapshots ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["", "a/b", "..", ".", "x y", "é", "a" * 65, "../prod"])
def test_unsafe_tags_are_refused(tag: str) -> None:
    with pytest.raises(BadInput, match="invalid tag"):
        check_tag(tag)


def test_snapshot_round_trip_keeps_bytes_mode_and_the_replaced_file(profiles_dir: Path) -> None:
    profile = profiles_dir / "prod.toml"
    original = b"# odd \xe2\x80\x94 layout\r\n[args]\r\nmax_num_seqs=32   \r\n"
    profile.write_bytes(original)
    profile.chmod(0o640)
    bak = bak_path(profiles_dir, "prod", check_tag("gdn_off"))
    save_snapshot(profile, bak, force=False)
    assert bak.read_bytes() == original and (bak.stat().st_mode & 0o777) == 0o640
    with pytest.raises(BadInput, match="never overwritten silently"):
        save_snapshot(profile, bak, force=False)
    profile.write_bytes(b"[args]\nmax_num_seqs = 16\n")
    now = datetime(2026, 9, 17, 10, 15, 0, tzinfo=UTC)
    kept = restore_snapshot(profile, bak, now)
    assert profile.read_bytes() == original and (profile.stat().st_mode & 0o777) == 0o640
    assert kept == profiles_dir / "prod.toml.replaced-20260917T101500Z"
    assert kept.read_bytes() == b"[args]\nmax_num_seqs = 16\n"
    assert replaced_path(profile, now).name == "prod.toml.replaced-20260917T101500Z-2"
    assert available_tags(profiles_dir, "prod") == ["gdn_off"]
    assert sorted(p.name for p in profiles_dir.iterdir()) == ["prod.toml", "prod.toml.bak_gdn_off", kept.name]


@pytest.mark.parametrize("tag", ["a", "a" * 64, "gdn_off", "v1.2-rc", "..x", "2026-09-17"])
def test_tags_up_to_64_safe_characters_are_accepted(tag: str) -> None:
    assert check_tag(tag) == tag


def test_a_tag_with_a_trailing_newline_is_refused() -> None:
    """`$` in the pattern would accept "gdn\\n": the file name would carry a newline."""
    with pytest.raises(BadInput, match="invalid tag"):
        check_tag("gdn\n")


def test_the_snapshot_path_is_the_profile_file_with_its_tag() -> None:
    assert bak_path(Path("/p"), "prod", "gdn_off") == Path("/p/prod.toml.bak_gdn_off")


def _touch(path: Path, mtime: float, text: str = "x") -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_tags_are_listed_newest_first_by_the_time_the_snapshot_was_written(profiles_dir: Path) -> None:
    _touch(profiles_dir / "prod.toml.bak_old", 1_700_000_000)
    _touch(profiles_dir / "prod.toml.bak_newest", 1_700_000_300)
    _touch(profiles_dir / "prod.toml.bak_middle", 1_700_000_100)
    assert available_tags(profiles_dir, "prod") == ["newest", "middle", "old"]


def test_only_this_profiles_snapshots_with_valid_tags_that_are_files_are_listed(profiles_dir: Path) -> None:
    _touch(profiles_dir / "prod.toml.bak_mine", 1_700_000_000)
    _touch(profiles_dir / "prod2.toml.bak_theirs", 1_700_000_000)  # another profile's
    _touch(profiles_dir / "prod.toml.bak_", 1_700_000_000)  # an empty tag
    _touch(profiles_dir / "prod.toml.bak_with space", 1_700_000_000)
    _touch(profiles_dir / "prod.toml.replaced-20260101T000000Z", 1_700_000_000)
    (profiles_dir / "prod.toml.bak_adir").mkdir()
    assert available_tags(profiles_dir, "prod") == ["mine"]
    assert available_tags(profiles_dir, "prod2") == ["theirs"]
    assert available_tags(profiles_dir, "absent") == []


def test_the_replaced_copy_is_named_in_utc_whatever_the_callers_zone() -> None:
    from datetime import timedelta, timezone

    tokyo = timezone(timedelta(hours=9))
    now = datetime(2026, 9, 17, 19, 15, 0, tzinfo=tokyo)
    assert replaced_path(Path("/p/prod.toml"), now).name == "prod.toml.replaced-20260917T101500Z"


def test_a_second_taken_already_gets_the_next_free_serial(profiles_dir: Path) -> None:
    profile = profiles_dir / "prod.toml"
    now = datetime(2026, 9, 17, 10, 15, 0, tzinfo=UTC)
    for name in ("prod.toml.replaced-20260917T101500Z", "prod.toml.replaced-20260917T101500Z-2"):
        (profiles_dir / name).write_text("x")
    assert replaced_path(profile, now).name == "prod.toml.replaced-20260917T101500Z-3"
    assert replaced_path(profile, datetime(2026, 9, 17, 10, 15, 1, tzinfo=UTC)).name == (
        "prod.toml.replaced-20260917T101501Z"
    )


def test_pruning_keeps_the_newest_copies_by_the_time_and_serial_in_their_names(profiles_dir: Path) -> None:
    """Serials compare as numbers: `-10` is newer than `-9`, though it sorts before it as text; the
    file times say nothing (a copy restored from a backup has a new mtime)."""
    profile = profiles_dir / "prod.toml"
    stamp = "20260917T101500Z"
    names = [f"prod.toml.replaced-{stamp}"] + [f"prod.toml.replaced-{stamp}-{n}" for n in (2, 9, 10)]
    names.append("prod.toml.replaced-20260918T000000Z")
    for age, name in enumerate(names):
        _touch(profiles_dir / name, 1_800_000_000 - age)  # mtimes in the reverse order of the names
    removed = prune_replaced(profile, keep=2)
    assert sorted(p.name for p in removed) == sorted(names[:3])
    left = sorted(p.name for p in profiles_dir.iterdir())
    assert left == [f"prod.toml.replaced-{stamp}-10", "prod.toml.replaced-20260918T000000Z"]


def test_pruning_touches_nothing_that_is_not_a_replaced_copy_of_this_profile(profiles_dir: Path) -> None:
    profile = profiles_dir / "prod.toml"
    keep = [
        "prod.toml.replaced-notes",
        "prod.toml.replaced-20260917T101500Z.orig",
        "prod.toml.replaced-2026091T101500Z",  # a digit short
        "prod.toml.replaced-20260917T101500Z-1234567",  # a serial longer than replaced_path writes
        "prod2.toml.replaced-20260101T000000Z",
        "prod.toml.bak_20260101T000000Z",
    ]
    for name in keep:
        (profiles_dir / name).write_text("x")
    (profiles_dir / "prod.toml.replaced-20250101T000000Z").symlink_to(profiles_dir / "prod2.toml.bak")
    (profiles_dir / "prod.toml.replaced-20250102T000000Z").mkdir()
    assert prune_replaced(profile, keep=0) == []
    assert sorted(p.name for p in profiles_dir.iterdir()) == sorted(
        [*keep, "prod.toml.replaced-20250101T000000Z", "prod.toml.replaced-20250102T000000Z"]
    )


def test_pruning_with_fewer_copies_than_kept_removes_nothing(profiles_dir: Path) -> None:
    for day in range(1, 4):
        (profiles_dir / f"prod.toml.replaced-202601{day:02d}T000000Z").write_text("x")
    assert prune_replaced(profiles_dir / "prod.toml", keep=3) == []
    assert len(prune_replaced(profiles_dir / "prod.toml", keep=2)) == 1
    assert not (profiles_dir / "prod.toml.replaced-20260101T000000Z").exists()


def test_a_restore_where_the_profile_is_gone_keeps_no_copy_and_takes_the_snapshots_mode(
    profiles_dir: Path,
) -> None:
    bak = profiles_dir / "prod.toml.bak_t"
    bak.write_bytes(b"[args]\nmax_num_seqs = 4\n")
    bak.chmod(0o600)
    profile = profiles_dir / "prod.toml"
    assert restore_snapshot(profile, bak, datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert profile.read_bytes() == bak.read_bytes() and (profile.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in profiles_dir.iterdir()) == ["prod.toml", "prod.toml.bak_t"]


def test_a_forced_snapshot_replaces_the_old_one_with_the_profiles_bytes(profiles_dir: Path) -> None:
    profile = profiles_dir / "prod.toml"
    profile.write_bytes(b"new = 1\n")
    bak = bak_path(profiles_dir, "prod", "t")
    bak.write_bytes(b"old = 1\n")
    save_snapshot(profile, bak, force=True)
    assert bak.read_bytes() == b"new = 1\n"


def test_save_and_write_leaves_the_snapshot_of_the_old_text_and_the_new_text_in_place(
    profiles_dir: Path,
) -> None:
    profile = profiles_dir / "prod.toml"
    profile.write_bytes(b"[args]\nmax_num_seqs = 32\n")
    bak = bak_path(profiles_dir, "prod", "before")
    save_and_write(profile, bak, "[args]\nmax_num_seqs = 8\n", force=False)
    assert bak.read_bytes() == b"[args]\nmax_num_seqs = 32\n"
    assert profile.read_text() == "[args]\nmax_num_seqs = 8\n"
    with pytest.raises(BadInput, match="never overwritten silently"):
        save_and_write(profile, bak, "[args]\nmax_num_seqs = 1\n", force=False)
    assert profile.read_text() == "[args]\nmax_num_seqs = 8\n", "a refused snapshot writes nothing"


def test_save_and_write_that_cannot_read_the_profile_leaves_no_snapshot(profiles_dir: Path) -> None:
    profile = profiles_dir / "prod.toml"
    profile.symlink_to(profiles_dir / "nowhere" / "prod.toml")  # a dangling link: unreadable
    bak = bak_path(profiles_dir, "prod", "t")
    with pytest.raises(BadInput, match="nothing was changed"):
        save_and_write(profile, bak, "x = 1\n", force=False)
    assert not bak.exists()
