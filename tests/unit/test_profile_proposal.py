"""A proposed profile text checked before it replaces the real one (launcher/profile/proposal.py), the
check behind `launch set` and `launch rollback`: rendered in a scratch copy, its messages naming the
real files, and the profiles that extend it checked with it, blamed only for what it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.errors import BadInput
from launcher.profile.proposal import check_proposal
from tests.conftest import tree_snapshot

BASE = (
    'abstract = true\n[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "org/m"\n[args]\nmax_num_seqs = 4\n'
)


def write(profiles_dir: Path, name: str, text: str) -> Path:
    path = profiles_dir / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture
def family(profiles_dir: Path) -> Path:
    """base (abstract) ← prod ← prod-canary; `loose` extends nothing."""
    write(profiles_dir, "base", BASE)
    write(profiles_dir, "prod", 'extends = "base"\n[args]\nmax_num_seqs = 16\n')
    write(profiles_dir, "prod-canary", 'extends = "prod"\n[args]\nblock_size = 32\n')
    write(profiles_dir, "loose", '[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "org/x"\n')
    return profiles_dir


def test_the_proposal_is_rendered_and_the_real_profiles_are_not_touched(family: Path) -> None:
    before = tree_snapshot(family)
    proposed = b'extends = "base"\n[args]\nmax_num_seqs = 8\n'
    check = check_proposal(family, "prod", proposed, shown_as=family / "prod.toml")
    assert check.errors == () and check.dependents == ("prod-canary",)
    at = check.plan.argv.index("--max-num-seqs")
    assert check.plan.argv[at + 1] == "8", "the proposed text renders, not the file on disk"
    assert tree_snapshot(family) == before


def test_a_proposals_errors_name_the_file_it_is_shown_as_never_the_scratch_copy(family: Path) -> None:
    bak = family / "prod.toml.bak_gdn"
    check = check_proposal(family, "prod", b'extends = "base"\n[args]\nmax_num_seqs = 0.5\n', shown_as=bak)
    own, inherited = check.errors
    assert own.startswith(f"{bak}: args.max_num_seqs = 0.5"), own
    # prod-canary inherits the value: its error names prod.toml, the real file the value will live in
    assert inherited.startswith(
        f"profile 'prod-canary' (extends 'prod'): {family / 'prod.toml'}: args.max_num_seqs"
    )
    assert not any("vllm-gate-proposal-" in e for e in check.errors)


def test_a_value_inherited_from_a_real_parent_is_named_at_the_parent(family: Path) -> None:
    write(family, "base", BASE.replace("max_num_seqs = 4", 'max_num_seqs = "many"'))
    check = check_proposal(family, "prod", b'extends = "base"\n', shown_as=family / "prod.toml")
    assert check.errors and check.errors[0].startswith(f"{family / 'base.toml'}: args.max_num_seqs")


def test_a_proposal_that_is_not_toml_is_refused_naming_the_shown_file(family: Path) -> None:
    shown = family / "prod.toml"
    with pytest.raises(BadInput) as caught:
        check_proposal(family, "prod", b"[args\nmax_num_seqs = 8\n", shown_as=shown)
    assert caught.value.message.startswith(f"{shown}:1:"), caught.value.message
    assert "vllm-gate-proposal-" not in caught.value.message


def test_an_edit_of_a_parent_that_breaks_a_child_is_refused_in_the_childs_name(family: Path) -> None:
    without_model = BASE.replace('model = "org/m"\n', "").encode()
    check = check_proposal(family, "base", without_model, shown_as=family / "base.toml")
    assert check.dependents == ("prod", "prod-canary"), "children and grandchildren alike"
    assert check.errors == (
        f"profile 'prod' (extends 'base'): {family / 'prod.toml'}: engine.model is required "
        "(vLLM's positional MODEL)",
        f"profile 'prod-canary' (extends 'base'): {family / 'prod-canary.toml'}: engine.model is required "
        "(vLLM's positional MODEL)",
    )


def test_a_childs_error_from_before_the_change_is_not_blamed_on_it(family: Path) -> None:
    write(family, "prod-canary", 'extends = "prod"\n[args]\nblock_size = "big"\n')
    proposed = BASE.replace("max_num_seqs = 4", "max_num_seqs = 2").encode()
    check = check_proposal(family, "base", proposed, shown_as=family / "base.toml")
    assert "prod-canary" in check.dependents and check.errors == ()


def test_a_child_that_does_not_resolve_is_no_dependent(family: Path) -> None:
    write(family, "stray", 'extends = "nowhere"\n')
    write(family, "loop-a", 'extends = "loop-b"\n')
    write(family, "loop-b", 'extends = "loop-a"\n')
    check = check_proposal(family, "base", BASE.encode(), shown_as=family / "base.toml")
    assert check.dependents == ("prod", "prod-canary")


def test_a_proposal_that_breaks_only_itself_is_its_own_error(family: Path) -> None:
    check = check_proposal(
        family, "loose", b'[engine]\ncommand = ["vllm-sim", "serve"]\n', shown_as=family / "loose.toml"
    )
    assert check.dependents == ()
    assert check.errors == (f"{family / 'loose.toml'}: engine.model is required (vLLM's positional MODEL)",)


def test_a_new_profile_can_be_proposed_beside_the_others(family: Path) -> None:
    check = check_proposal(family, "fresh", b'extends = "prod"\n', shown_as=family / "fresh.toml")
    assert check.errors == () and check.plan.name == "fresh"
    assert not (family / "fresh.toml").exists()


def test_warnings_are_carried_and_renamed_too(family: Path) -> None:
    proposed = b'extends = "base"\n[args]\nbogus_flag = 1\n'
    check = check_proposal(family, "prod", proposed, shown_as=family / "prod.toml", allow_unknown=True)
    assert check.errors == ()
    assert any(w.startswith(f"{family / 'prod.toml'}: args.bogus_flag") for w in check.warnings), (
        check.warnings
    )
    strict = check_proposal(family, "prod", proposed, shown_as=family / "prod.toml")
    assert any("bogus_flag" in e for e in strict.errors)
