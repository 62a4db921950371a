"""What every gate shares: its settings read from `[gates.NAME]`, with declared defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gates.context import GateContext
from gates.outcome import Outcome
from gates.setting import Setting

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


class GateBase:
    """Reads settings once, at construction; starts nothing (gates act only inside `check`)."""

    name: ClassVar[str]
    SETTINGS: ClassVar[tuple[Setting, ...]] = ()
    DEFAULT_TIMEOUT_S: ClassVar[float] = 60.0

    def __init__(self, table: Mapping[str, Any] | None = None) -> None:
        table = dict(table or {})
        self.table = table
        self.required = bool(table.get("required", True))
        timeout = table.get("timeout_s")
        self.timeout_s = float(timeout) if timeout is not None else self.DEFAULT_TIMEOUT_S
        self.poll_s = float(table.get("poll_s", 0.5))

    def check(self, ctx: GateContext) -> Outcome:  # pragma: no cover - every gate overrides it
        raise NotImplementedError

    def setting(self, name: str) -> Any:
        for setting in self.SETTINGS:
            if setting.name == name:
                return self.table.get(name, setting.default)
        raise KeyError(f"{self.name} declares no setting {name!r}")

    @classmethod
    def all_settings(cls) -> tuple[Setting, ...]:
        return COMMON + cls.SETTINGS

    @classmethod
    def table_problems(cls, table: Mapping[str, Any]) -> list[str]:
        """Rules between settings (each value alone is checked by its declaration); the dry run asks."""
        return []
