"""What the shipped alert rules and dashboard may name (fleet/prometheus, fleet/grafana), read from
the two sources of truth: the launcher's textfile as launcher/state/metrics.py really writes it (every
family present: a history and a status that exercise all of them), and vLLM's /metrics page as the
real 0.26.0 served it (tests/data/real-vllm-0.26/eager/metrics-after.txt; docs/vllm-facts.md §8).

And a small reader of PromQL, enough to say which series an expression names and with which labels:
string literals, ranges, grouping clauses and Grafana's `$variables` are set aside, an identifier
followed by `(` is a function or an aggregation, the rest are metric names. It is a check, not a
parser: promtool parses the rules where it is installed (tests/unit/test_fleet_prometheus.py).
"""

from __future__ import annotations

import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from launcher.state.metrics import LauncherMetrics
from tests.conftest import REPO

RECORDED_VLLM_PAGE = REPO / "tests" / "data" / "real-vllm-0.26" / "eager" / "metrics-after.txt"
SCRAPE_LABELS = frozenset({"instance", "job"})  # what Prometheus adds to every series it scrapes
# Every record that feeds a family, with the stamps the launcher writes.
FULL_HISTORY: list[dict[str, Any]] = [
    {"ts": "2025-03-01T10:00:00.000000Z", "event": event, "verdict": verdict, "startup_seconds": 40.0}
    for event, verdict in [
        ("start", None), ("gates", None), ("promoted", None), ("rejected", None), ("rollback", None),
        ("engine_died", None), ("watch", "degraded"), ("wedged", "wedged"), ("failing", "failing"),
        ("starving", "starving"), ("parked", None), ("park_skipped", None), ("woken", None),
        ("wake_failed", None), ("beside", None), ("beside_skipped", None), ("reload_refused", None),
    ]
]  # fmt: skip
for _record in FULL_HISTORY:  # the gates record carries its start's timeline (docs/logs.md)
    if _record["event"] == "gates":
        _record["timeline"] = {"phases": [{"name": "weights", "seconds": 3.0}, {"name": "api_server", "seconds": 2.0}]}
FULL_STATUS = {
    "phase": "serving",
    "watch": {"verdict": "serving"},
    "gates": [{"name": "health", "verdict": "pass"}, {"name": "tool_call", "verdict": "fail"}],
}

KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "by", "without", "on", "ignoring", "group_left", "group_right", "offset"}
    | {"inf", "nan", "atan2"}
)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")
VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
MATCHERS = re.compile(r"\{[^{}]*\}")
RANGE = re.compile(r"\[[^\]]*\]")
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
OFFSET = re.compile(r"\boffset\s+-?\w+")
IDENTIFIER = re.compile(r"[A-Za-z_:][\w:]*")
SELECTOR = re.compile(r"(?P<name>[A-Za-z_:][\w:]*)\s*\{(?P<matchers>[^{}]*)\}")
MATCHER = re.compile(r"(?P<label>[A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")


def _series_of(text: str) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in found.items()}


@cache
def launcher_series() -> dict[str, frozenset[str]]:
    """Series name → its labels, as the launcher's metrics code writes them."""
    with tempfile.TemporaryDirectory() as scratch:
        metrics = LauncherMetrics(Path(scratch), "prod", FULL_HISTORY)
        metrics.update(FULL_STATUS)
        return _series_of(metrics.path.read_text(encoding="utf-8"))


@cache
def vllm_series() -> dict[str, frozenset[str]]:
    """Series name → its labels, as vLLM 0.26.0 served them."""
    return _series_of(RECORDED_VLLM_PAGE.read_text(encoding="utf-8"))


def known_series() -> dict[str, frozenset[str]]:
    """Every series a shipped query may name: the launcher's and vLLM's."""
    return {**launcher_series(), **vllm_series()}


def _bare(expr: str) -> str:
    """The expression with strings, variables, matchers, ranges, grouping and offsets set aside."""
    text = STRING.sub('""', expr)
    text = VARIABLE.sub("", text)
    text = MATCHERS.sub("", text)
    text = RANGE.sub("", text)
    text = GROUPING.sub("", text)
    return OFFSET.sub("", text)


def metric_names(expr: str) -> set[str]:
    """The series an expression selects, by name."""
    text = _bare(expr)
    names = set()
    for match in IDENTIFIER.finditer(text):
        before = text[match.start() - 1] if match.start() else " "
        if before.isdigit() or before == ".":
            continue  # the exponent of a number: 1e3
        if text[match.end() :].lstrip().startswith("(") or match.group().lower() in KEYWORDS:
            continue  # a function, an aggregation, an operator
        names.add(match.group())
    return names


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """Each `name{matchers}` of the expression: the name and the labels its matchers name."""
    text = VARIABLE.sub("", expr)
    return [
        (m["name"], {matcher["label"] for matcher in MATCHER.finditer(m["matchers"])})
        for m in SELECTOR.finditer(text)
        if m["name"].lower() not in KEYWORDS
    ]


def grouping_labels(expr: str) -> list[tuple[str, set[str]]]:
    """Each `by (…)`, `on (…)`, … clause: its keyword and its labels."""
    return [
        (m.group(1), {label.strip() for label in m.group(2).split(",") if label.strip()})
        for m in GROUPING.finditer(STRING.sub('""', expr))
    ]


def balanced(text: str) -> bool:
    depth = {"(": 0, "[": 0, "{": 0}
    closing = {")": "(", "]": "[", "}": "{"}
    for char in re.sub(r'"(?:[^"\\]|\\.)*"', "", text):
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            if depth[closing[char]] < 0:
                return False
    return not any(depth.values())


def expr_problems(where: str, expr: object, known: dict[str, frozenset[str]]) -> list[str]:
    """Unknown series, matchers on labels the series lacks, grouping by labels none of them has."""
    if not isinstance(expr, str) or not expr.strip():
        return [f"{where}: no expr"]
    if not balanced(expr):
        return [f"{where}: unbalanced brackets in {expr!r}"]
    names = metric_names(expr)
    problems = [f"{where}: names {name}, which nothing writes" for name in sorted(names - set(known))]
    if not names:
        problems.append(f"{where}: names no series")
    for name, labels in selectors(expr):
        missing = labels - known.get(name, frozenset()) - SCRAPE_LABELS
        problems += [f"{where}: {name} has no label {label}" for label in sorted(missing)]
    carried = set().union(*(known.get(name, frozenset()) for name in names)) | SCRAPE_LABELS
    for keyword, group in grouping_labels(expr):
        problems += [f"{where}: {keyword} ({label}), which no series has" for label in sorted(group - carried)]
    return problems


def kept_labels(expr: str, known: dict[str, frozenset[str]]) -> set[str]:
    """The labels an alert's series keep: those of the series named, less what an aggregation's
    `by (…)` drops (`on (…)` only matches the two sides: the left side's labels stay)."""
    labels = set().union(*(known.get(name, frozenset()) for name in metric_names(expr))) | SCRAPE_LABELS
    for keyword, group in grouping_labels(expr):
        if keyword == "by":
            labels &= group
    return labels
