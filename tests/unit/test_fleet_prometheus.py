"""fleet/prometheus/vllm-gate.rules.yml, the alerts that ship: a rules file Prometheus loads (its
shape checked here in Python, always; `promtool check rules` and `promtool test rules` where promtool
is installed: .ci/run installs it from Debian's `prometheus` package), naming only series that
exist (the launcher's as its metrics code writes them, vLLM's as 0.26.0 served them) with labels
they carry, and the alerts docs/fleet.md lists."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.fleet_series import expr_problems, kept_labels, known_series

yaml = pytest.importorskip("yaml")

RULES = REPO / "fleet" / "prometheus" / "vllm-gate.rules.yml"
RULES_TEST = REPO / "fleet" / "prometheus" / "vllm-gate.rules.test.yml"
FLEET_DOC = REPO / "docs" / "fleet.md"
GROUP_KEYS = {"name", "interval", "limit", "rules"}
ALERT_KEYS = {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")
ALERT_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
SEVERITIES = {"critical", "warning", "info"}
TEMPLATE_LABEL = re.compile(r"\$labels\.(\w+)")


def rules() -> dict[str, Any]:
    loaded = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def alert_problems(where: str, rule: dict[str, Any], known: dict[str, frozenset[str]]) -> list[str]:
    problems = [f"{where}: unknown key {key}" for key in sorted(set(rule) - ALERT_KEYS)]
    if not ALERT_NAME.match(str(rule.get("alert"))):
        problems.append(f"{where}: alert name {rule.get('alert')!r} is not CamelCase")
    problems += expr_problems(where, rule.get("expr"), known)
    for key in ("for", "keep_firing_for"):
        if key in rule and not DURATION.match(str(rule[key])):
            problems.append(f"{where}: {key} {rule[key]!r} is not a Prometheus duration")
    if (rule.get("labels") or {}).get("severity") not in SEVERITIES:
        problems.append(f"{where}: severity is not one of {sorted(SEVERITIES)}")
    annotations = rule.get("annotations") or {}
    problems += [f"{where}: no {key} annotation" for key in ("summary", "description") if not annotations.get(key)]
    carried = kept_labels(str(rule.get("expr", "")), known)
    for key, text in annotations.items():
        if str(text).count("{{") != str(text).count("}}"):
            problems.append(f"{where}: {key}: unbalanced template")
        unknown = set(TEMPLATE_LABEL.findall(str(text))) - carried
        problems += [f"{where}: {key} reads $labels.{label}, which the alert lacks" for label in sorted(unknown)]
    return problems


def file_problems(doc: Any, known: dict[str, frozenset[str]]) -> list[str]:
    """Everything Prometheus would refuse, or alert on wrongly, in a rules document."""
    if not isinstance(doc, dict) or set(doc) != {"groups"} or not doc["groups"]:
        return ["the file is not one `groups:` list"]
    problems: list[str] = []
    groups, alerts = [], []
    for group in doc["groups"]:
        groups.append(group.get("name"))
        problems += [f"group {group.get('name')}: unknown key {k}" for k in sorted(set(group) - GROUP_KEYS)]
        if not group.get("rules"):
            problems.append(f"group {group.get('name')}: no rules")
        for rule in group.get("rules") or []:
            alerts.append(rule.get("alert"))
            problems += alert_problems(f"{group.get('name')}/{rule.get('alert')}", rule, known)
    problems += [f"{kind} {name} twice" for kind, names in (("group", groups), ("alert", alerts))
                 for name in sorted({n for n in names if names.count(n) > 1})]  # fmt: skip
    return problems


def test_the_rules_file_is_one_prometheus_loads_and_names_only_what_exists() -> None:
    assert file_problems(rules(), known_series()) == []


def test_the_check_finds_what_prometheus_would_refuse_or_alert_on_wrongly() -> None:
    """The check above can fail: each broken copy is caught, with its reason."""
    known = known_series()

    def broken(change: str) -> list[str]:
        doc = copy.deepcopy(rules())
        rule = doc["groups"][0]["rules"][0]
        match change:
            case "metric":
                rule["expr"] = "vllm_gate_servng == 0"
            case "label":
                rule["expr"] = 'vllm_gate_phase{stage="failed"} == 1'
            case "for":
                rule["for"] = "2 minutes"
            case "severity":
                rule["labels"] = {"severity": "page"}
            case "template":
                rule["annotations"]["summary"] = "{{ $labels.verdict }} on {{ $labels.instance }}"
            case "twice":
                doc["groups"][0]["rules"].append(copy.deepcopy(rule))
            case "vllm":
                rule["expr"] = "vllm:gpu_cache_usage_perc > 0.9"  # gone by 0.26.0 (vllm-facts.md §8)
        return file_problems(doc, known)

    assert "vllm-gate/VllmGateNotServing: names vllm_gate_servng, which nothing writes" in broken("metric")
    assert broken("label") == ["vllm-gate/VllmGateNotServing: vllm_gate_phase has no label stage"]
    assert broken("for") == ["vllm-gate/VllmGateNotServing: for '2 minutes' is not a Prometheus duration"]
    assert broken("severity") == ["vllm-gate/VllmGateNotServing: severity is not one of ['critical', 'info', 'warning']"]
    assert broken("template") == [
        "vllm-gate/VllmGateNotServing: summary reads $labels.verdict, which the alert lacks"
    ]
    assert broken("twice") == ["alert VllmGateNotServing twice"]
    assert "vllm-gate/VllmGateNotServing: names vllm:gpu_cache_usage_perc, which nothing writes" in broken("vllm")


def test_docs_fleet_lists_every_alert_of_the_rules_file() -> None:
    shipped = {rule["alert"] for group in rules()["groups"] for rule in group["rules"]}
    doc = FLEET_DOC.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(Vllm\w+)` \|", doc, re.MULTILINE))
    assert listed == shipped
    assert "fleet/prometheus/vllm-gate.rules.yml" in doc


def promtool() -> str:
    """promtool on PATH, else beside this Python (where .ci/run puts it); skip, saying why, without."""
    beside = str(Path(sys.executable).parent)
    found = shutil.which("promtool", path=os.pathsep.join([os.environ.get("PATH", ""), beside]))
    if found is None:
        pytest.skip("promtool is not installed (.ci/run installs it from Debian's prometheus package)")
    return found


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rules()['groups'])} rules found" in done.stdout


def test_promtool_runs_the_rules_unit_tests() -> None:
    """Two launchers' series through the alerts: a failed start pages only once it is no start, a
    rejected change and a silent launcher, a wedged watch (vllm-gate.rules.test.yml)."""
    done = subprocess.run(
        [promtool(), "test", "rules", RULES_TEST.name],
        cwd=RULES_TEST.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
