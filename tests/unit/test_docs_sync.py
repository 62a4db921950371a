"""Docs generated from declarations stay true: the key table in docs/profiles.md."""

from __future__ import annotations

from launcher.profile.keys import reference_markdown
from tests.conftest import REPO


def test_profiles_doc_carries_the_generated_key_table() -> None:
    doc = (REPO / "docs" / "profiles.md").read_text(encoding="utf-8")
    assert reference_markdown() in doc, "regenerate the key table in docs/profiles.md from launcher/profile/keys.py"


def test_gates_doc_carries_the_generated_settings_tables() -> None:
    from gates.reference import reference_markdown as gates_reference

    doc = (REPO / "docs" / "gates.md").read_text(encoding="utf-8")
    assert gates_reference() in doc, "regenerate the settings tables in docs/gates.md from gates/reference.py"
