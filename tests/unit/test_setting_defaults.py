"""Every setting's default lives in its declaration and is applied by `SettingValues` alone: a reader
that spells its own default drifts (`launch try` stopped vLLM after 10 s on a signal while
`stop_grace_s` declared 30)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from basis.setting import Setting, SettingValues
from gates.base import COMMON
from gates.registry import GATE_SETTINGS
from launcher.profile.keys import (
    ENGINE,
    FRONTDOOR,
    PREFLIGHT,
    SUPERVISOR,
    TOP_LEVEL,
    FrontdoorSettings,
    SupervisorSettings,
)

ROOT = Path(__file__).resolve().parents[2]
DECLARED = {
    s.name
    for group in (ENGINE, PREFLIGHT, SUPERVISOR, FRONTDOOR, COMMON, *GATE_SETTINGS.values())
    for s in group
}
# The top-level tables (`[engine]`, `[args]`…) are looked up with an empty table, as declared.
TABLES = {s.name for s in TOP_LEVEL}
# Same word, another dict: a JSON schema's `required` list in a tool's parameters.
ELSEWHERE = {("gates/tool_cases.py", "required")}


def _own_defaults(tree: ast.AST) -> list[tuple[int, str, str]]:
    """`x.get("declared_name", default)`: a default spelled at the read (line, name, the call)."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in DECLARED - TABLES
        ):
            found.append((node.lineno, str(node.args[0].value), ast.unparse(node)))
    return found


def test_no_reader_spells_a_declared_settings_default() -> None:
    offenders = []
    for package in ("launcher", "gates", "basis"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("launcher/sim/") or relative == "basis/setting.py":
                continue  # the simulator is its own program; setting.py is where defaults are applied
            for line, name, call in _own_defaults(ast.parse(path.read_text(encoding="utf-8"))):
                if (relative, name) not in ELSEWHERE:
                    offenders.append(f"{relative}:{line}: {call}")
    assert offenders == [], "read these through SettingValues:\n" + "\n".join(offenders)


def test_the_check_sees_a_default_spelled_at_the_read() -> None:
    code = 'grace = float(supervisor.get("stop_grace_s", 10.0))\nengine = data.get("engine", {})\n'
    assert [call for *_, call in _own_defaults(ast.parse(code))] == ["supervisor.get('stop_grace_s', 10.0)"]


def test_a_value_not_set_is_the_declared_default_and_an_undeclared_name_is_a_key_error() -> None:
    declared = (Setting("grace_s", float, 30.0, "grace"), Setting("mode", str, None, "mode"))
    values = SettingValues.of(declared, {"mode": "log"})
    assert values.number("grace_s") == 30.0
    assert values.optional_text("mode") == "log"
    assert SettingValues.of(declared, None).optional_text("mode") is None
    assert SettingValues.of(declared, "not a table").number("grace_s") == 30.0  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="grace"):
        values.value("grace")


def test_the_supervisor_table_reads_every_declared_default() -> None:
    defaults = SupervisorSettings.read({})
    for setting in SUPERVISOR:
        assert getattr(defaults, setting.name) == setting.default, setting.name
    configured = SupervisorSettings.read({"stop_grace_s": 5, "leak_monitor": "log", "on_wedge": "log"})
    assert (configured.stop_grace_s, configured.leak_monitor, configured.on_wedge) == (5.0, "log", "log")
    assert configured.leak_action == "log"
    assert SupervisorSettings.read({"on_wedge": "rollback"}).leak_action == "rollback"  # follows on_wedge


def test_the_frontdoor_table_reads_every_declared_default() -> None:
    defaults = FrontdoorSettings.read({})
    for setting in FRONTDOOR:
        assert getattr(defaults, setting.name) == setting.default, setting.name
    assert not defaults.enabled  # no port: no door
    configured = FrontdoorSettings.read({"port": 9000, "hold_s": 5, "admin": "/run/d.sock"})
    assert (configured.enabled, configured.hold_s, configured.admin) == (True, 5.0, "/run/d.sock")
