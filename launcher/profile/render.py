"""Render a resolved profile into the exact argv and environment vLLM gets.

Deterministic: the same profile gives a byte-identical argv. Order: command, model, the engine's
name/host/port flags, then `[args]` sorted by flag name. Values:
- `true` → the bare flag; `false` → the flag's `--no-` form where vLLM has one;
- a table → compact JSON (`--compilation-config '{"cudagraph_capture_sizes":[1,2]}'`);
- a list → one token per item for `nargs='+'` flags, compact JSON for JSON flags;
- floats in their shortest round-trip form (`0.3`, not `0.30000000000000004`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from basis.setting import SettingValues
from launcher.profile.engine_flags import API_KEY_VAR, duplicate_message, engine_flag_of
from launcher.profile.findings import Findings, did_you_mean, where
from launcher.profile.keys import SUPERVISOR, engine_settings
from launcher.profile.loader import ResolvedProfile
from launcher.redact import note_secret_name
from vllm_flags.schema import OptionSpec, VllmSchema

DEV_MODE_VAR = "VLLM_SERVER_DEV_MODE"  # vLLM registers /sleep, /wake_up, /is_sleeping only with it


def _parks(profile: ResolvedProfile) -> bool:
    """`[supervisor] park = "sleep"`: vLLM starts with `--enable-sleep-mode` and the dev-mode routes.
    Read through the declared setting, as the supervisor reads it (a table of the wrong type is the
    structure check's error: rendered as the default, `stop`)."""
    supervisor = profile.data.get("supervisor")
    park = SettingValues.of(SUPERVISOR, supervisor if isinstance(supervisor, dict) else None).value("park")
    return bool(park == "sleep")


@dataclass(frozen=True, slots=True)
class Rendered:
    argv: tuple[str, ...]
    env: dict[str, str]
    secret_env: dict[str, str]  # variable vLLM reads → variable of the launcher's env that holds it

    def unset_secrets(self, environ: Mapping[str, str]) -> list[str]:
        """The variables secret_env reads that `environ` lacks or holds empty: vLLM would then serve
        without a key (an empty VLLM_API_KEY is no key), so a start refuses them."""
        return [source for source in self.secret_env.values() if not environ.get(source, "").strip()]


def render(profile: ResolvedProfile, schema: VllmSchema, findings: Findings, *, lenient: bool) -> Rendered:
    """Render argv/env; unknown flags are errors unless `lenient` (a fork: `engine.schema = "none"`)."""
    engine = profile.data.get("engine", {})
    parking = _parks(profile)
    argv = [*_engine_argv(profile), *_args_argv(profile, schema, findings, lenient, sleep_mode=parking)]
    env = {name: str(value) for name, value in sorted(profile.data.get("env", {}).items())}
    if parking:
        env = dict(sorted({**env, DEV_MODE_VAR: "1"}.items()))
    secret_env: dict[str, str] = {}
    if engine.get("api_key_env"):
        secret_env[API_KEY_VAR] = str(engine["api_key_env"])
        note_secret_name(secret_env[API_KEY_VAR])  # its value is masked wherever it shows up
    return Rendered(argv=tuple(argv), env=env, secret_env=secret_env)


def _engine_argv(profile: ResolvedProfile) -> list[str]:
    """The command, the model, then the engine's name, host and port flags."""
    engine = profile.data.get("engine", {})
    declared = engine_settings(profile.data)
    command = declared.value("command")  # a command of the wrong type is an error of the structure check
    argv = [str(part) for part in command] if isinstance(command, list) else [str(command)]
    if engine.get("model"):
        argv.append(str(engine["model"]))
    names = engine.get("served_model_name")
    if names:
        argv += ["--served-model-name", *([names] if isinstance(names, str) else [str(n) for n in names])]
    return argv + ["--host", declared.text("host"), "--port", declared.text("port")]


def _args_argv(
    profile: ResolvedProfile, schema: VllmSchema, findings: Findings, lenient: bool, *, sleep_mode: bool
) -> list[str]:
    """`[args]` as flags sorted by name; `--enable-sleep-mode` added where the profile parks asleep."""
    rendered_args: list[tuple[str, list[str]]] = []
    for key, value in profile.data.get("args", {}).items():
        tokens = _render_arg(profile, schema, key, value, findings, lenient)
        if tokens:
            rendered_args.append((tokens[0], tokens))
    if sleep_mode and not any(flag == "--enable-sleep-mode" for flag, _ in rendered_args):
        rendered_args.append(("--enable-sleep-mode", ["--enable-sleep-mode"]))
    return [token for _, tokens in sorted(rendered_args, key=lambda item: item[0]) for token in tokens]


def _render_arg(
    profile: ResolvedProfile, schema: VllmSchema, key: str, value: Any, findings: Findings, lenient: bool
) -> list[str]:
    dotted = f"args.{key}"
    here = where(profile.source_of(dotted), dotted)
    engine_flag = engine_flag_of(schema, key)
    if engine_flag is not None:
        findings.error(duplicate_message(here, value, profile.data, engine_flag))
        return []
    spec = schema.option_for_key(key)
    if spec is None:
        hint = did_you_mean(key.replace("-", "_"), _profile_keys(schema))
        findings.error_or_warn(
            lenient, f"{here}: vLLM {schema.vllm_version} has no flag --{_kebab(key)}{hint}"
        )
        return _render_unknown(key, value)
    if spec.kind == "flag":
        return _render_flag(schema, spec, value, here, findings)
    text = _value_tokens(spec, value, here, findings)
    return [spec.option, *text] if text is not None else []


def _render_flag(
    schema: VllmSchema, spec: OptionSpec, value: Any, here: str, findings: Findings
) -> list[str]:
    if not isinstance(value, bool):
        findings.error(f"{here} = {value!r}: {spec.option} is a switch, write true or false")
        return []
    if value is spec.sets:
        return [spec.option]
    negation = schema.negation_of(spec)
    if negation is None:
        findings.warn(f"{here} = {value}: vLLM has no inverse of {spec.option}; left out (its default)")
        return []
    return [negation.option]


def _value_tokens(spec: OptionSpec, value: Any, here: str, findings: Findings) -> list[str] | None:
    kind = spec.type or "other"
    if kind == "json":
        if isinstance(value, dict | list):
            return [json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
        if isinstance(value, str):
            return [value]
        findings.error(f"{here} = {value!r}: {spec.option} takes JSON (write a table)")
        return None
    if isinstance(value, list):
        if not spec.takes_list:
            findings.error(f"{here} = {value!r}: {spec.option} takes one value, not a list")
            return None
        items = [_scalar(spec, kind, item, here, findings) for item in value]
        return None if any(i is None for i in items) else [str(i) for i in items]
    if isinstance(value, dict):
        findings.error(f"{here}: {spec.option} does not take a table")
        return None
    token = _scalar(spec, kind, value, here, findings)
    return None if token is None else [token]


def _scalar(spec: OptionSpec, kind: str, value: Any, here: str, findings: Findings) -> str | None:
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "human_int": (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
    }.get(kind, not isinstance(value, dict | list))
    if not ok:
        findings.error(f"{here} = {value!r}: {spec.option} takes {_kind_words(kind)}")
        return None
    token = _format(value)
    if spec.choices is not None and token not in spec.choices:
        choices = ", ".join(spec.choices)
        findings.error(f"{here} = {value!r}: not one of vLLM's choices for {spec.option} ({choices})")
        return None
    return token


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _kind_words(kind: str) -> str:
    return {
        "int": "an integer",
        "float": "a number",
        "human_int": "an integer or a size like 32k",
        "str": "a string",
        "bool": "true or false",
    }.get(kind, "a scalar value")


def _render_unknown(key: str, value: Any) -> list[str]:
    option = f"--{_kebab(key)}"
    if value is True:
        return [option]
    if value is False:
        return [f"--no-{_kebab(key)}"]
    if isinstance(value, dict):
        return [option, json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    if isinstance(value, list):
        return [option, *(_format(v) for v in value)]
    return [option, _format(value)]


def _kebab(key: str) -> str:
    return key.replace("_", "-")


def _profile_keys(schema: VllmSchema) -> list[str]:
    return sorted({o[2:].replace("-", "_") for o in schema.options if o.startswith("--")})
