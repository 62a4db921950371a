"""The vLLM flags the launcher renders from `[engine]`: an `[args]` key that names one is refused.

`[args] host = "0.0.0.0"` beside `[engine] host = "127.0.0.1"` rendered `--host` twice; argparse
keeps the last, so vLLM listened on every address while the launcher (its checks, its dial, sleep
mode's loopback rule) believed engine.host (issue 42). The same holds for the port, the model, the
served names and the API key. A key names such a flag by vLLM's `dest` (`served-model-name` and
`served_model_name` alike) or, where a fork's unknown flags are let through, by an abbreviation
vLLM's argparse would expand (`hos` → `--host`; vllm-facts.md §9).
"""

from __future__ import annotations

from typing import Any

from launcher.profile.findings import Findings, where
from launcher.profile.keys import engine_settings
from launcher.profile.loader import ResolvedProfile
from vllm_flags.schema import VllmSchema

API_KEY_VAR = "VLLM_API_KEY"  # vLLM's --api-key falls back to it (vllm-facts.md §9)

# vLLM's dest → the [engine] key the launcher renders it from
ENGINE_DESTS: dict[str, str] = {
    "host": "host",
    "port": "port",
    "model": "model",
    "served_model_name": "served_model_name",
    "api_key": "api_key_env",
}


def engine_flag_of(schema: VllmSchema, key: str) -> tuple[str, str] | None:
    """(the `[engine]` key, vLLM's option) when `args.KEY` would give vLLM that option a second time."""
    spec = schema.option_for_key(key)
    if spec is not None:
        return (ENGINE_DESTS[spec.dest], spec.option) if spec.dest in ENGINE_DESTS else None
    prefix = "--" + key.replace("_", "-")
    matches = {o.dest: o.option for o in schema.options.values() if o.option.startswith(prefix)}
    if len(matches) != 1:
        return None
    dest, option = matches.popitem()
    return (ENGINE_DESTS[dest], option) if dest in ENGINE_DESTS else None


def duplicate_message(here: str, value: Any, profile_data: dict[str, Any], flag: tuple[str, str]) -> str:
    """One line naming both places, and where the value belongs."""
    engine_key, option = flag
    if engine_key == "api_key_env":
        return f"{here}: a literal API key in a profile; set engine.api_key_env to a variable NAME"
    now = engine_settings(profile_data).value(engine_key)
    given = "not set" if now is None else repr(now)
    return (
        f"{here} = {value!r} is vLLM's {option}, which the launcher renders from engine.{engine_key} "
        f"({given}): vLLM would get both and keep one, while the launcher goes by engine.{engine_key}; "
        f"set engine.{engine_key} only"
    )


def check_key_env(profile: ResolvedProfile, findings: Findings) -> None:
    """The API key reaches vLLM one way: `engine.api_key_env` names a variable of the launcher's own
    environment, copied into VLLM_API_KEY at start (it overrides `[env]`). A key written in `[env]`
    beside it is a second key, and one that sits in every `.bak_TAG` of the profile."""
    env, engine = profile.data.get("env"), profile.data.get("engine")
    if not isinstance(env, dict):
        return
    source = engine.get("api_key_env") if isinstance(engine, dict) else None
    if not isinstance(source, str):
        if API_KEY_VAR in env:
            at = where(profile.source_of(f"env.{API_KEY_VAR}"), f"env.{API_KEY_VAR}")
            findings.warn(
                f"{at}: a literal API key in a profile (and in its .bak_TAG snapshots); prefer "
                "engine.api_key_env, the NAME of a variable of the launcher's environment"
            )
        return
    for name in sorted({API_KEY_VAR, source} & set(env)):
        at = where(profile.source_of(f"env.{name}"), f"env.{name}")
        findings.error(
            f"{at}: a literal API key in a profile beside engine.api_key_env = {source!r}, which gives "
            f"vLLM its key from ${source} at start; drop env.{name} (the key itself never goes in a profile)"
        )
