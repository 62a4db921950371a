"""Every key `launch set` can address, with a word of help and the values it takes where they are a
closed list: what shell completion offers after `launch set --profile P`.

The same sources the validator reads, so completion offers nothing a dry run would refuse as unknown:
vLLM's own flags for `[args]` (the schema: the installed vLLM's, else the snapshot) less the ones
`[engine]` renders, its environment names for `env.`, and the declared settings of `[engine]`,
`[preflight]`, `[supervisor]`, `[frontdoor]` (`keys`) and of each gate (`gates.registry`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from basis.setting import Setting
from launcher.profile.engine_flags import ENGINE_DESTS
from launcher.profile.keys import ENGINE, FRONTDOOR, PREFLIGHT, SUPERVISOR
from vllm_flags.schema import OptionSpec, VllmSchema

HELP_CHARS = 72  # one line in zsh's and fish's lists
BOOLEAN = ("true", "false")
TABLES: dict[str, tuple[Setting, ...]] = {
    "engine": ENGINE,
    "preflight": PREFLIGHT,
    "supervisor": SUPERVISOR,
    "frontdoor": FRONTDOOR,
}


@dataclass(frozen=True, slots=True)
class Address:
    key: str  # as `launch set` takes it: max_num_seqs, env.VLLM_X, gates.health.timeout_s
    help: str
    values: tuple[str, ...] = ()  # the values it takes, where they are a closed list


def addresses(schema: VllmSchema, extra_flags: list[OptionSpec] | None = None) -> list[Address]:
    """Every key, `[args]` first; `extra_flags`: flags the engine takes beyond vLLM's (the simulator's)."""
    return [
        *_args(schema, extra_flags or []),
        *_settings(),
        *_gates(),
        *(Address(f"env.{name}", "vLLM environment variable") for name in sorted(schema.env_vars)),
    ]


def _args(schema: VllmSchema, extra: list[OptionSpec]) -> Iterator[Address]:
    seen: set[str] = set()
    for spec in [*schema.options.values(), *extra]:
        key = spec.option[2:].replace("-", "_")
        if not spec.option.startswith("--") or key in seen or not _settable(spec):
            continue
        seen.add(key)
        if spec.kind == "flag":
            yield Address(key, _short(f"vLLM switch ({spec.group or 'flags'})"), BOOLEAN)
        else:
            values = spec.choices or spec.metavar_choices or ()
            yield Address(key, _short(f"vLLM flag ({spec.group or 'flags'})"), values)


def _settable(spec: OptionSpec) -> bool:
    """A flag a profile writes: not help, not a `--no-` form (a profile writes `x = false`), not one
    `[engine]` renders."""
    if spec.kind == "flag" and spec.sets is not True:
        return False
    return spec.dest not in ENGINE_DESTS


def _settings() -> Iterator[Address]:
    for table, settings in TABLES.items():
        for setting in settings:
            yield _setting(f"{table}.{setting.name}", setting)


def _gates() -> Iterator[Address]:
    from gates.registry import GATE_SETTINGS

    yield Address("gates.order", "the gates a start runs, in order", ())
    for name, settings in GATE_SETTINGS.items():
        for setting in settings:
            yield _setting(f"gates.{name}.{setting.name}", setting)


def _setting(key: str, setting: Setting) -> Address:
    """A string's choices and a switch's true/false are a closed list; a list's allowed items are not."""
    values = BOOLEAN if setting.type is bool else (setting.choices or ()) if setting.type is str else ()
    return Address(key, _short(setting.description), values)


def _short(text: str) -> str:
    line = text.split(". ")[0].rstrip(".")
    return line if len(line) <= HELP_CHARS else line[: HELP_CHARS - 1] + "…"
