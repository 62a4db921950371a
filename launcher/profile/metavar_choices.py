"""Values vLLM lists only in a flag's metavar, checked like `choices` before anything starts.

vLLM takes any string for `--kv-cache-dtype` (0.33.0) and the other flags whose type is a `Literal`
that also allows `str`, and refuses a name outside the list only once the engine is configured, after
its imports (vllm-facts.md §9.1): `kv_cache_dtype = "fp9"` passed the dry run, and a reload stopped
production for a start that could not succeed (issue 44). Whose list is certain follows the parser
names' rule (`parser_names`): the installed vLLM's, or the simulator's release, and a value outside
it is an error; the snapshot standing in for a vLLM that is not importable here is not certain (a fork
or a newer release lists more: prod's `turboquant_2bit_nc`), so there, as with `--allow-unknown`, it
is a warning.
"""

from __future__ import annotations

import re
from typing import Any

from launcher.profile.findings import Findings, did_you_mean, where
from launcher.profile.loader import ResolvedProfile
from vllm_flags.schema import OptionSpec, VllmSchema

# `--distributed-executor-backend` also takes an executor class by its qualified name (vllm-facts.md §9.1).
QUALIFIED_NAME_OPTIONS = frozenset({"--distributed-executor-backend"})
QUALIFIED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def check_metavar_choices(
    profile: ResolvedProfile, schema: VllmSchema, findings: Findings, *, certain: bool, whose: str
) -> None:
    """One finding per `[args]` value outside its flag's listed values: an error when `certain`."""
    args = profile.data.get("args", {})
    if not isinstance(args, dict):
        return
    for key, value in args.items():
        spec = schema.option_for_key(str(key))
        if spec is None or spec.metavar_choices is None or _listed(spec, value):
            continue
        here = where(profile.source_of(f"args.{key}"), f"args.{key}")
        listed = spec.metavar_choices
        findings.error_or_warn(
            not certain,
            f"{here} = {value!r}: {whose} lists no such value for {spec.option}; one of: "
            f"{', '.join(listed)}{did_you_mean(value, listed)}",
        )


def _listed(spec: OptionSpec, value: Any) -> bool:
    """A value vLLM will take; a value of the wrong type is the renderer's error, not this one's."""
    listed = spec.metavar_choices or ()
    if not isinstance(value, str) or value in listed:
        return True
    if value == "" and "None" in listed:  # an optional field: vLLM reads "" as None too
        return True
    return spec.option in QUALIFIED_NAME_OPTIONS and QUALIFIED_NAME.fullmatch(value) is not None
