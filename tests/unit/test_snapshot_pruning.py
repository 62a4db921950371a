"""`launch set` keeps the newest `--keep` snapshots of a profile (issue 44, point 5): `.bak_*` and
`.replaced-*` files piled up in profiles/ one per change and were never removed. What goes is said
and counted (`launch rollback --list`); a snapshot a rollback may still want is never removed, no link
is followed, nothing outside the profiles dir is touched, and a bad `--keep` changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from launcher.profile.plan import build_plan
from tests.conftest import tree_snapshot


def cli(profiles: Path, state: Path, *args: str) -> Result:
    return CliRunner().invoke(launch, ["--profiles-dir", str(profiles), "--state-dir", str(state), *args])


def snapshot(profiles: Path, tag: str, mtime: int, text: str | None = None) -> Path:
    """A `.bak_<tag>` of demo written `mtime` (epoch s); by default a copy of demo.toml as it is."""
    path = profiles / f"demo.toml.bak_{tag}"
    path.write_text(text if text is not None else (profiles / "demo.toml").read_text())
    os.utime(path, (mtime, mtime))
    return path


def old_snapshots(profiles: Path, count: int) -> list[Path]:
    """`count` snapshots s1 (oldest) … sN, each of another max_num_seqs, none equal to the file now."""
    text = (profiles / "demo.toml").read_text()
    return [
        snapshot(
            profiles, f"s{n}", 1_700_000_000 + n, text.replace("max_num_seqs = 8", f"max_num_seqs = {n + 8}")
        )
        for n in range(1, count + 1)
    ]


def tags_left(profiles: Path) -> list[str]:
    return sorted(p.name.removeprefix("demo.toml.bak_") for p in profiles.glob("demo.toml.bak_*"))


def test_set_keeps_the_newest_n_and_says_and_counts_what_went(
    shipped_profiles: Path, state_dir: Path
) -> None:
    old_snapshots(shipped_profiles, 4)
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "--profile",
        "demo",
        "max_num_seqs=16",
        "--tag",
        "new",
        "--keep",
        "3",
    )
    assert result.exit_code == 0, result.output
    assert tags_left(shipped_profiles) == ["new", "s3", "s4"]
    assert "pruned  demo.toml.bak_s2, demo.toml.bak_s1  (the newest 3 of each kind are kept)" in result.output
    listed = cli(shipped_profiles, state_dir, "rollback", "--list", "--profile", "demo")
    assert listed.exit_code == 0, listed.output
    assert "pruned so far: 2 older snapshots and 0 .replaced- copies, the last at 20" in listed.output
    [record] = (state_dir / "profiles" / "demo" / "pruned.jsonl").read_text().splitlines()
    gone = ["demo.toml.bak_s2", "demo.toml.bak_s1"]
    assert json.loads(record) | {"ts": "T"} == {"ts": "T", "by": "set", "keep": 3, "snapshots": gone,
                                                "replaced": []}  # fmt: skip


def test_the_default_keeps_twenty(shipped_profiles: Path, state_dir: Path) -> None:
    old_snapshots(shipped_profiles, 21)
    assert cli(shipped_profiles, state_dir, "set", "demo", "max_num_seqs=7", "--tag", "new").exit_code == 0
    assert len(tags_left(shipped_profiles)) == 20 and "s1" not in tags_left(shipped_profiles)
    assert "s2" not in tags_left(shipped_profiles) and "s3" in tags_left(shipped_profiles)


def test_a_snapshot_a_rollback_may_still_want_is_never_pruned(
    shipped_profiles: Path, state_dir: Path
) -> None:
    """Past the newest N, spared: the one that renders what serves now, the one that renders
    last-good, and one byte-identical to the profile file as the change leaves it (its tag names
    the state the file is in)."""
    old = old_snapshots(shipped_profiles, 5)
    served = build_plan(shipped_profiles, "demo", top_file=old[0]).fingerprint()
    good = build_plan(shipped_profiles, "demo", top_file=old[1]).fingerprint()
    status_dir = state_dir / "profiles" / "demo"
    status_dir.mkdir(parents=True)
    (status_dir / "status.json").write_text(json.dumps({"phase": "serving", "serving_fingerprint": served}))
    (status_dir / "last_good.json").write_text(json.dumps({"fingerprint": good, "argv": [], "env": {}}))
    after = (shipped_profiles / "demo.toml").read_text().replace("max_num_seqs = 8", "max_num_seqs = 16")
    snapshot(shipped_profiles, "as_now", 1_600_000_000, after)  # the oldest, and what the file becomes
    result = cli(shipped_profiles, state_dir, "set", "demo", "max_num_seqs=16", "--tag", "new", "--keep", "1")
    assert result.exit_code == 0, result.output
    assert tags_left(shipped_profiles) == ["as_now", "new", "s1", "s2"]


def test_links_other_profiles_and_other_files_are_never_touched(
    shipped_profiles: Path, state_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = outside / "demo.toml.bak_far"
    target.write_text("an operator's file outside the profiles dir")
    (shipped_profiles / "demo.toml.bak_link").symlink_to(target)
    os.utime(shipped_profiles / "demo.toml.bak_link", (1_500_000_000, 1_500_000_000), follow_symlinks=False)
    (shipped_profiles / "demo.toml.bak_adir").mkdir()
    (shipped_profiles / "prod.toml.bak_theirs").write_text("x")
    (shipped_profiles / "demo.toml.bak_notes.orig~").write_text("not a tag")
    old_snapshots(shipped_profiles, 3)
    before = {p.name for p in shipped_profiles.iterdir()}
    result = cli(shipped_profiles, state_dir, "set", "demo", "max_num_seqs=16", "--tag", "new", "--keep", "1")
    assert result.exit_code == 0, result.output
    gone = before - {p.name for p in shipped_profiles.iterdir()}
    assert gone == {"demo.toml.bak_s1", "demo.toml.bak_s2", "demo.toml.bak_s3"}
    assert (shipped_profiles / "demo.toml.bak_link").is_symlink() and target.read_text().startswith(
        "an operator"
    )
    assert [p.name for p in outside.iterdir()] == ["demo.toml.bak_far"]


@pytest.mark.parametrize("keep", ["0", "-1", "1.5", "many", ""])
def test_a_keep_that_is_not_a_positive_whole_number_exits_2_and_changes_nothing(
    shipped_profiles: Path, state_dir: Path, keep: str
) -> None:
    old_snapshots(shipped_profiles, 3)
    before = tree_snapshot(shipped_profiles)
    result = cli(
        shipped_profiles, state_dir, "set", "demo", "max_num_seqs=16", "--tag", "new", "--keep", keep
    )
    assert result.exit_code == 2 and "--keep" in result.output, result.output
    assert "Traceback" not in result.output
    assert tree_snapshot(shipped_profiles) == before and not state_dir.exists()


def test_the_dry_run_names_what_would_go_and_removes_nothing(shipped_profiles: Path, state_dir: Path) -> None:
    old_snapshots(shipped_profiles, 3)
    before = tree_snapshot(shipped_profiles)
    argv = ["set", "demo", "max_num_seqs=16", "--tag", "new", "--keep", "2", "--dry-run"]
    shown = cli(shipped_profiles, state_dir, *argv)
    assert shown.exit_code == 0, shown.output
    assert "prune:  would remove demo.toml.bak_s2, demo.toml.bak_s1" in shown.output
    as_json = json.loads(cli(shipped_profiles, state_dir, *argv, "--json").stdout)
    assert as_json["would_prune"] == ["demo.toml.bak_s2", "demo.toml.bak_s1"] and as_json["keep"] == 2
    assert tree_snapshot(shipped_profiles) == before
