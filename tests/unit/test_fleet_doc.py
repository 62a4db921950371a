"""docs/fleet.md says what the code does: `launch status`'s exit codes as state/serving.py returns
them (it said 0 for a host serving its last-good while the code and the Ansible role used 6), the
same codes docs/exit-codes.md gives, and those the Ansible role accepts; README says where the
shipped rules file and dashboard are."""

from __future__ import annotations

import re

import yaml

from launcher.state.serving import (
    EXIT_NOT_SERVING,
    EXIT_SERVING,
    EXIT_SERVING_LAST_GOOD,
    EXIT_UNKNOWN,
    exit_code,
)
from tests.conftest import REPO

FLEET_DOC = REPO / "docs" / "fleet.md"
EXIT_DOC = REPO / "docs" / "exit-codes.md"
REPORT_TASKS = REPO / "fleet" / "ansible" / "roles" / "vllm_gate" / "tasks" / "report.yml"


def status_rows() -> dict[int, str]:
    """The exit table of docs/fleet.md's `launch status` section: code → meaning."""
    section = FLEET_DOC.read_text(encoding="utf-8").split("## `launch status`", 1)[1].split("\n## ", 1)[0]
    return {int(code): text for code, text in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.MULTILINE)}


def test_the_status_exit_table_is_what_the_code_returns() -> None:
    rows = status_rows()
    entry = {"phase": "serving", "serving": True}
    assert exit_code([entry]) == EXIT_SERVING and "`serving`" in rows[EXIT_SERVING]
    assert "serving_last_good" not in rows[EXIT_SERVING]  # was: "0 | serving: … or `serving_last_good`"
    last_good = {"phase": "serving_last_good", "serving": True}
    assert exit_code([last_good]) == EXIT_SERVING_LAST_GOOD and "`serving_last_good`" in rows[EXIT_SERVING_LAST_GOOD]
    assert exit_code([{"phase": "failed", "serving": False}]) == EXIT_NOT_SERVING
    assert "not serving" in rows[EXIT_NOT_SERVING] and "wedged" in rows[EXIT_NOT_SERVING]
    assert exit_code([{"phase": "unknown", "serving": False}]) == EXIT_UNKNOWN and "unknown" in rows[EXIT_UNKNOWN]


def test_fleet_md_exit_codes_exit_codes_md_and_the_ansible_role_agree() -> None:
    row = next(line for line in EXIT_DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `launch status` |"))
    documented = {int(code) for code in row.split("|")[2].split()}
    assert set(status_rows()) == documented
    task = next(t for t in yaml.safe_load(REPORT_TASKS.read_text(encoding="utf-8")) if t["name"] == "launch status")
    accepted = {int(code) for code in re.findall(r"\d+", task["failed_when"].split(" not in ", 1)[1])}
    assert accepted == {EXIT_SERVING, EXIT_NOT_SERVING, EXIT_SERVING_LAST_GOOD} and accepted <= documented


def test_readme_and_fleet_md_say_where_the_rules_and_the_dashboard_are() -> None:
    for doc in (REPO / "README.md", FLEET_DOC):
        text = doc.read_text(encoding="utf-8")
        for path in ("fleet/prometheus/vllm-gate.rules.yml", "fleet/grafana/vllm-gate.json"):
            assert path in text, f"{doc.name} does not say where {path} is"
            assert (REPO / path).is_file()
