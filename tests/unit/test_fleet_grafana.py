"""fleet/grafana/vllm-gate.json, the dashboard that ships: it parses, its data source is a variable
(no Grafana instance's uid is baked in), its panels tile the grid without overlapping, and every
query (panels, variables, annotations) names only series that exist — the launcher's as its metrics
code writes them, vLLM's as 0.26.0 served them (tests/fleet_series.py) — filtered and grouped by
labels they carry, with legends that read only labels the query keeps. The vLLM families it and the
rules read are the ones docs/vllm-facts.md §8 states."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.fleet_series import expr_problems, kept_labels, known_series, metric_names

DASHBOARD = REPO / "fleet" / "grafana" / "vllm-gate.json"
RULES = REPO / "fleet" / "prometheus" / "vllm-gate.rules.yml"
FACTS = REPO / "docs" / "vllm-facts.md"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
BUILT_IN = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}  # Grafana's own
VARIABLE = re.compile(r"\$\{?(\w+)")
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
LABEL_VALUES = re.compile(r"^label_values\((?P<expr>.+),\s*(?P<label>\w+)\)$")
GRID_COLUMNS = 24
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside a collapsed row too."""
    found = []
    for panel in board.get("panels", []):
        found.append(panel)
        found += panel.get("panels", [])
    return found


def prometheus_annotations(board: dict[str, Any]) -> list[dict[str, Any]]:
    """The annotations that query Prometheus: their PromQL in `target` (Grafana's Prometheus data
    source moves a legacy top-level `expr` there when it loads one)."""
    return [a for a in board["annotations"]["list"] if not a.get("builtIn")]


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(where, PromQL, legend) of every panel target, variable and annotation."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            yield f"panel {panel.get('title')!r} {target.get('refId')}", target.get("expr", ""), target.get("legendFormat")
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = LABEL_VALUES.match(query)
            assert match, f"variable {variable['name']}: {query!r} is not label_values(…)"
            yield f"variable {variable['name']}", match["expr"], "{{" + match["label"] + "}}"
    for annotation in prometheus_annotations(board):
        yield f"annotation {annotation['name']!r}", annotation["target"]["expr"], annotation.get("textFormat")


def query_problems(board: dict[str, Any]) -> list[str]:
    known = known_series()
    defined = {v["name"] for v in board["templating"]["list"]} | BUILT_IN
    problems = []
    for where, expr, legend in queries(board):
        problems += expr_problems(where, expr, known)
        problems += [f"{where}: ${name} is no variable" for name in sorted(set(VARIABLE.findall(expr)) - defined)]
        unknown = set(LEGEND_LABEL.findall(legend or "")) - kept_labels(expr, known)
        problems += [f"{where}: its legend reads {label}, which the query does not keep" for label in sorted(unknown)]
    return problems


def datasource_problems(board: dict[str, Any]) -> list[str]:
    """The data source is the `datasource` variable everywhere a query runs."""
    problems = []
    variable = [v for v in board["templating"]["list"] if v["name"] == "datasource"]
    if not variable or variable[0]["type"] != "datasource" or variable[0]["query"] != "prometheus":
        problems.append("no `datasource` variable of type datasource over prometheus")
    users = [(f"panel {p.get('title')!r}", p) for p in panels(board) if p["type"] != "row"]
    users += [(f"panel {p.get('title')!r} {t.get('refId')}", t) for p in panels(board) for t in p.get("targets", [])]
    users += [(f"variable {v['name']}", v) for v in board["templating"]["list"] if v["type"] == "query"]
    users += [(f"annotation {a['name']!r}", a) for a in prometheus_annotations(board)]
    problems += [f"{where}: data source {user.get('datasource')}" for where, user in users
                 if user.get("datasource") != DATASOURCE]  # fmt: skip
    if "__inputs" in board or "DS_" in json.dumps(board):
        problems.append("an import-time data source input instead of the variable")
    return problems


def layout_problems(board: dict[str, Any]) -> list[str]:
    """Unique ids, panels inside the grid's 24 columns, no two on the same cells."""
    problems: list[str] = []
    taken: dict[tuple[int, int], str] = {}
    ids = [int(p["id"]) for p in panels(board)]
    problems += [f"panel id {i} twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for panel in panels(board):
        grid = panel["gridPos"]
        if grid["x"] < 0 or grid["w"] <= 0 or grid["h"] <= 0 or grid["x"] + grid["w"] > GRID_COLUMNS:
            problems.append(f"panel {panel['title']!r} lies outside the grid: {grid}")
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                if (x, y) in taken:
                    problems.append(f"panel {panel['title']!r} covers {taken[(x, y)]!r} at x={x}, y={y}")
                    break
                taken[(x, y)] = panel["title"]
            else:
                continue
            break
    return problems


def test_the_dashboard_parses_and_has_grafana_s_shape() -> None:
    board = dashboard()
    assert board["title"] == "vllm-gate" and board["uid"] == "vllm-gate"
    assert isinstance(board["schemaVersion"], int)
    kinds = {p["type"] for p in panels(board)}
    assert kinds <= {"row", "stat", "timeseries", "state-timeline", "bargauge", "table"}
    assert all(p.get("title") for p in panels(board))
    assert all(p.get("targets") for p in panels(board) if p["type"] != "row")
    for panel in panels(board):
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)), panel["title"]


def test_the_data_source_is_a_variable() -> None:
    assert datasource_problems(dashboard()) == []


def test_the_panels_tile_the_grid() -> None:
    assert layout_problems(dashboard()) == []


def test_every_query_names_only_series_that_exist() -> None:
    assert query_problems(dashboard()) == []


def test_the_dashboard_reads_the_launcher_and_vllm_alike() -> None:
    named = {name for _, expr, _ in queries(dashboard()) for name in metric_names(expr)}
    assert {n for n in named if n.startswith("vllm_gate_")} >= {
        "vllm_gate_serving", "vllm_gate_phase", "vllm_gate_watch_verdict", "vllm_gate_start_seconds",
        "vllm_gate_reloads_refused_total", "vllm_gate_parks_total", "vllm_gate_wakes_total",
        "vllm_gate_watch_verdicts_total", "vllm_gate_last_update_timestamp_seconds",
    }  # fmt: skip
    assert {n for n in named if n.startswith("vllm:")} >= {
        "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds_bucket",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ("metric", "panel 'Serving' A: names vllm_gate_servng, which nothing writes"),
        ("label", "panel 'Serving' A: vllm_gate_serving has no label gate"),
        ("legend", "panel 'Serving' A: its legend reads verdict, which the query does not keep"),
        ("variable", "panel 'Serving' A: $profiles is no variable"),
        ("vllm", "panel 'Serving' A: names vllm:gpu_cache_usage_perc, which nothing writes"),
        ("datasource", "panel 'Serving' A: data source {'type': 'prometheus', 'uid': 'P1809F7CD0C75ACF3'}"),
        ("overlap", "panel 'Phase' covers 'Serving' at x=0, y=1"),
    ],
)
def test_the_checks_find_what_would_break_a_panel(change: str, found: str) -> None:
    """Each check above can fail: a broken copy of the first panel is caught, with its reason."""
    board = copy.deepcopy(dashboard())
    panel = next(p for p in board["panels"] if p["title"] == "Serving")
    target = panel["targets"][0]
    match change:
        case "metric":
            target["expr"] = 'vllm_gate_servng{profile=~"$profile"}'
        case "label":
            target["expr"] = 'vllm_gate_serving{gate="health"}'
        case "legend":
            target["legendFormat"] = "{{verdict}}"
        case "variable":
            target["expr"] = 'vllm_gate_serving{profile=~"$profiles"}'
        case "vllm":
            target["expr"] = "vllm:gpu_cache_usage_perc"  # gone by 0.26.0 (vllm-facts.md §8)
        case "datasource":
            target["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
        case "overlap":
            next(p for p in board["panels"] if p["title"] == "Phase")["gridPos"]["x"] = 0
    assert found in query_problems(board) + datasource_problems(board) + layout_problems(board)


def test_every_vllm_family_the_fleet_reads_is_a_stated_fact() -> None:
    """The dashboard's and the rules' vLLM families are in docs/vllm-facts.md §8, with the rest of
    vLLM's metric names the code relies on."""
    section = FACTS.read_text(encoding="utf-8").split("## §8 ", 1)[1].split("\n## ", 1)[0]
    exprs = [expr for _, expr, _ in queries(dashboard())]
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    exprs += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    families = set()
    for name in {n for expr in exprs for n in metric_names(expr) if n.startswith("vllm:")}:
        for suffix in SUFFIXES:
            name = name.removesuffix(suffix)
        families.add(name)
    assert families and sorted(f for f in families if f"`{f}`" not in section) == []
