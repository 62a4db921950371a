"""Shape checks of a resolved profile: known keys, right types, required values."""

from __future__ import annotations

import re
from typing import Any

from basis.setting import Setting, SettingValues
from gates.base import COMMON
from gates.registry import DEFAULT_ORDER, GATE_SETTINGS, GATES, gate_settings
from launcher.profile.findings import Findings, did_you_mean, where
from launcher.profile.keys import ENGINE, FRONTDOOR, PREFLIGHT, SUPERVISOR, TOP_LEVEL
from launcher.profile.loader import ResolvedProfile
from launcher.redact import MASK, is_secret_name

ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
GATES_TABLE_KEYS = ("order",)


def check_structure(profile: ResolvedProfile, findings: Findings) -> None:
    data = profile.data
    _check_table(profile, data, TOP_LEVEL, "", findings)
    engine = data.get("engine", {})
    if isinstance(engine, dict):
        _check_table(profile, engine, ENGINE, "engine.", findings)
        _check_engine(profile, engine, findings)
    preflight = data.get("preflight", {})
    if isinstance(preflight, dict):
        _check_table(profile, preflight, PREFLIGHT, "preflight.", findings)
    supervisor = data.get("supervisor", {})
    if isinstance(supervisor, dict):
        _check_table(profile, supervisor, SUPERVISOR, "supervisor.", findings)
    frontdoor = data.get("frontdoor", {})
    if isinstance(frontdoor, dict):
        _check_table(profile, frontdoor, FRONTDOOR, "frontdoor.", findings)
    _check_env(profile, findings)
    _check_args_text(profile, findings)
    _check_gates(profile, findings)
    _check_required_gate(profile, findings)


def _check_engine(profile: ResolvedProfile, engine: dict[str, Any], findings: Findings) -> None:
    """What `[engine]`'s declarations cannot judge (they check the port's range and the command's
    items): a model unless abstract, a command that is not empty, the API key's variable name."""
    if not engine.get("model") and profile.data.get("abstract") is not True:
        findings.error(f"{profile.files[0]}: engine.model is required (vLLM's positional MODEL)")
    if engine.get("command") == []:
        findings.error(
            f"{where(profile.source_of('engine.command'), 'engine.command')}: a non-empty list of strings"
        )
    key_env = engine.get("api_key_env")
    if isinstance(key_env, str) and not ENV_NAME_RE.match(key_env):
        findings.error(
            f"{where(profile.source_of('engine.api_key_env'), 'engine.api_key_env')} = {key_env!r}: "
            "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
        )


def _check_table(
    profile: ResolvedProfile,
    table: dict[str, Any],
    settings: tuple[Setting, ...],
    prefix: str,
    findings: Findings,
) -> None:
    known = {s.name: s for s in settings}
    for key, value in table.items():
        dotted = prefix + key
        setting = known.get(key)
        source = profile.source_of(dotted)
        if setting is None:
            findings.error(f"{where(source, dotted)}: unknown key{did_you_mean(key, known)}")
        elif not setting.accepts(value):
            findings.error(f"{where(source, dotted)} = {value!r}: expected {setting.type_name}")
        elif (problem := setting.problem(value)) is not None:
            findings.error(f"{where(source, dotted)} = {value!r}: {problem}")


def _check_env(profile: ResolvedProfile, findings: Findings) -> None:
    env = profile.data.get("env", {})
    if not isinstance(env, dict):
        return
    for name, value in env.items():
        at = where(profile.source_of(f"env.{name}"), f"env.{name}")
        shown = MASK if is_secret_name(name) else repr(value)  # errors are printed: a key is not
        if not ENV_NAME_RE.match(name):
            findings.error(f"{at}: not a valid environment variable name")
        if isinstance(value, bool) or not isinstance(value, str | int):
            findings.error(f"{at} = {shown}: environment values are strings")
        elif isinstance(value, str) and has_control(value):
            findings.error(f"{at} = {shown}: contains a control character")


def _check_gates(profile: ResolvedProfile, findings: Findings) -> None:
    gates = profile.data.get("gates", {})
    if not isinstance(gates, dict):
        return
    for name, table in gates.items():
        dotted = f"gates.{name}"
        if name in GATES_TABLE_KEYS:
            _check_order(profile, table, findings)
            continue
        settings = gate_settings(name)
        if settings is None:
            source = profile.source_of(dotted)
            findings.error(
                f"{where(source, dotted)}: no gate named {name!r}{did_you_mean(name, GATE_SETTINGS)}"
            )
            continue
        if not isinstance(table, dict):
            findings.error(f"{where(profile.source_of(dotted), dotted)}: must be a table [gates.{name}]")
            continue
        _check_table(profile, table, settings, dotted + ".", findings)
        for problem in GATES[name].table_problems(table):
            findings.error(f"{where(profile.source_of(dotted), dotted)}: {problem}")


def _check_order(profile: ResolvedProfile, order: Any, findings: Findings) -> None:
    source = profile.source_of("gates.order")
    if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
        findings.error(f"{where(source, 'gates.order')}: a list of gate names")
        return
    for name in order:
        if name not in GATE_SETTINGS:
            findings.error(
                f"{where(source, 'gates.order')}: no gate named {name!r}{did_you_mean(name, GATE_SETTINGS)}"
            )
    for name in sorted({n for n in order if order.count(n) > 1}):
        # a gate runs once per chain: a second entry would run it again on the same engine, and its
        # table applies to both, so the duplicate is a mistake (issue 33)
        findings.error(f"{where(source, 'gates.order')}: gate {name!r} is listed {order.count(name)} times")


def has_control(text: str) -> bool:
    """A control character (newline, NUL, escape…): never valid in argv, env or a unit file."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _check_args_text(profile: ResolvedProfile, findings: Findings) -> None:
    """Every string of `[args]` becomes argv: a NUL cannot be passed, a newline has no place."""
    args = profile.data.get("args", {})
    if not isinstance(args, dict):
        return
    for key, value in args.items():
        if any(has_control(text) for text in _strings(value)) or has_control(key):
            dotted = "args." + key
            findings.error(f"{where(profile.source_of(dotted), dotted)}: contains a control character")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


def _check_required_gate(profile: ResolvedProfile, findings: Findings) -> None:
    """A chain with no required gate promotes anything (`gates.order = []` once promoted a
    candidate with no gates at all), so it is refused; `abstract` profiles are not launched."""
    gates = profile.data.get("gates", {})
    if not isinstance(gates, dict) or profile.data.get("abstract") is True:
        return
    order = gates.get("order", list(DEFAULT_ORDER))
    if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
        return
    required = [n for n in order if _required(gates.get(n))]
    if not required:
        findings.error(
            f"{where(profile.source_of('gates'), 'gates')}: the chain {order} has no required gate, "
            "so any candidate would be promoted (add a gate to gates.order, or set required = true)"
        )


def _required(table: Any) -> bool:
    return SettingValues.of(COMMON, table).value("required") is not False
