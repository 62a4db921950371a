"""What every gate shares: its settings read from `[gates.NAME]`, with declared defaults, and what
it needs to judge (`Need`), from which follows where it can run (`registry.http_only`)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar

from basis.setting import Setting, SettingValues
from gates.context import GateContext
from gates.outcome import Outcome

COMMON: tuple[Setting, ...] = (
    Setting("required", bool, True, "A failure of this gate rejects the candidate (false: report only)."),
    Setting(
        "timeout_s",
        (int, float),
        None,
        "Deadline for this gate, from the moment it starts.",
        unit="s",
        minimum=0.1,
        maximum=7 * 86400,
    ),
    Setting(
        "poll_s",
        (int, float),
        0.5,
        "How often a waiting gate looks again (it also wakes on new log lines).",
        unit="s",
        minimum=0.05,
        maximum=60,
    ),
)


class Need(StrEnum):
    """What a gate cannot judge without. HTTP reaches any server; the rest only the launcher that
    starts the engine has: the log it watched from the first line, the processes it started, and a
    server it may put under load before the server takes real traffic."""

    HTTP = "http"
    LOG = "log"
    PROCESSES = "processes"
    LOAD = "load"

    @property
    def meaning(self) -> str:
        """What the gate does with it, as a phrase after "it": `it reads the start's log`."""
        return _MEANINGS[self]


_MEANINGS: dict[Need, str] = {
    Need.HTTP: "asks the server over HTTP",
    Need.LOG: "reads the start's log",
    Need.PROCESSES: "watches the engine's processes and their memory",
    Need.LOAD: "puts minutes of generated load on the server",
}


class GateBase:
    """Reads settings once, at construction; starts nothing (gates act only inside `check`).

    Each gate declares `NEEDS`, what its `check` reads of the context (no default: a gate that
    forgot it cannot be registered, `registry.HTTP_ONLY` reads it at import)."""

    name: ClassVar[str]
    NEEDS: ClassVar[frozenset[Need]]
    SETTINGS: ClassVar[tuple[Setting, ...]] = ()
    DEFAULT_TIMEOUT_S: ClassVar[float] = 60.0

    def __init__(self, table: Mapping[str, Any] | None = None) -> None:
        self.table = dict(table or {})
        common = SettingValues.of(COMMON, self.table)
        self.required = common.flag("required")
        timeout = common.value("timeout_s")  # declared without a default: each gate has its own
        self.timeout_s = float(timeout) if timeout is not None else self.DEFAULT_TIMEOUT_S
        self.poll_s = common.number("poll_s")

    def check(self, ctx: GateContext) -> Outcome:  # pragma: no cover - every gate overrides it
        raise NotImplementedError

    def setting(self, name: str) -> Any:
        """A gate's own setting: the table's value, else the declared default."""
        if not any(setting.name == name for setting in self.SETTINGS):
            raise KeyError(f"{self.name} declares no setting {name!r}")
        return SettingValues.of(self.SETTINGS, self.table).value(name)

    @classmethod
    def all_settings(cls) -> tuple[Setting, ...]:
        return COMMON + cls.SETTINGS

    @classmethod
    def table_problems(cls, table: Mapping[str, Any]) -> list[str]:
        """Rules between settings (each value alone is checked by its declaration); the dry run asks."""
        return []
