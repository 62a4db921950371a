"""Tool-call and reasoning parser names the engine will refuse, caught before anything starts.

vLLM refuses an unknown name only once its imports are done (vllm-facts.md §5.5: `KeyError:
'invalid tool call parser: …'`, 26 s on the GPU machine), after a rollout has already stopped
production. Whose names apply: the installed vLLM's (`schema_cache` keeps them) when vLLM is
importable here; for `vllm-sim`, the release it speaks — 0.33 registers the snapshot's names
(`vllm_flags.registered_parsers`); another `--sim-vllm-version` is not known here and is not
checked; for a real vLLM that is not importable here, the snapshot's names stand in, so a name they
lack is a warning, not an error (a newer vLLM registers more). A `*_parser_plugin` may register
any name: nothing is checked then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.profile.findings import Findings, did_you_mean, where
from launcher.profile.loader import ResolvedProfile
from vllm_flags.schema import VllmSchema

SIM_RELEASE = (
    "0.33"  # the `--sim-vllm-version` whose names are the snapshot's (vllm_flags/sim_flags.py default)
)


@dataclass(frozen=True, slots=True)
class ParserNames:
    """`whose`: named in each finding; `certain`: these are the names of the engine that will run."""

    tool: frozenset[str] | None
    reasoning: frozenset[str] | None
    whose: str
    certain: bool


def parser_names(
    schema: VllmSchema, args: dict[str, Any], *, sim: bool, installed: bool
) -> ParserNames | None:
    """The names to check this profile against, or None when they are not known here."""
    if sim:  # whatever vLLM is installed beside it, the simulator registers its release's names
        release = str(_arg(args, "sim_vllm_version") or SIM_RELEASE)
        if release != SIM_RELEASE:
            return None
        from vllm_flags.schema import load_snapshot

        snapshot = load_snapshot()
        return ParserNames(
            snapshot.tool_parsers, snapshot.reasoning_parsers, f"vllm-sim (vLLM {release})", True
        )
    whose = (
        f"vLLM {schema.vllm_version}"
        if installed
        else f"vLLM {schema.vllm_version} (the snapshot; none here)"
    )
    return ParserNames(schema.tool_parsers, schema.reasoning_parsers, whose, installed)


def check_parser_names(profile: ResolvedProfile, names: ParserNames, findings: Findings) -> None:
    args = profile.data.get("args", {})
    if not isinstance(args, dict):
        return
    auto_tools = _arg(args, "enable_auto_tool_choice") is True
    if names.tool is not None and _arg(args, "tool_parser_plugin") is None:
        # without --enable-auto-tool-choice vLLM never looks the name up: it would only matter later
        _check_one(profile, args, "tool_call_parser", "tool", names.tool, names, auto_tools, findings)
    if names.reasoning is not None and _arg(args, "reasoning_parser_plugin") is None:
        _check_one(profile, args, "reasoning_parser", "reasoning", names.reasoning, names, True, findings)


def _check_one(
    profile: ResolvedProfile,
    args: dict[str, Any],
    key: str,
    kind: str,
    known: frozenset[str],
    names: ParserNames,
    refused_at_start: bool,
    findings: Findings,
) -> None:
    spelled = _spelling(args, key)
    value = args.get(spelled) if spelled is not None else None
    if not isinstance(value, str) or value in known or (kind == "reasoning" and value in ("", "none")):
        return
    message = (
        f"{where(profile.source_of(f'args.{spelled}'), f'args.{spelled}')} = {value!r}: {names.whose} "
        f"registers no such {kind} parser{did_you_mean(value, known)}"
    )
    if refused_at_start and names.certain:
        vllm_words = "tool call" if kind == "tool" else kind  # `KeyError: 'invalid tool call parser: …'`
        findings.error(message + f" (vLLM refuses to start: invalid {vllm_words} parser)")
    else:
        findings.warn(message)


def _spelling(args: dict[str, Any], key: str) -> str | None:
    """The profile's own spelling of a key (`tool_call_parser` or `tool-call-parser`)."""
    return next((k for k in args if str(k).replace("-", "_") == key), None)


def _arg(args: dict[str, Any], key: str) -> Any:
    spelled = _spelling(args, key)
    return args.get(spelled) if spelled is not None else None
