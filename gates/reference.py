"""docs/gates.md's tables, generated from each gate's declarations: what it needs, its settings."""

from __future__ import annotations

from gates.base import Need
from gates.registry import DEFAULT_ORDER, GATES, HTTP_ONLY


def reference_markdown() -> str:
    lines = [f"Default chain: `{', '.join(DEFAULT_ORDER)}` (set `gates.order` to change it).", ""]
    lines += needs_markdown()
    for name, cls in GATES.items():
        lines += [f"### `[gates.{name}]`", "", "| key | type | default | allowed | meaning |"]
        lines += ["|---|---|---|---|---|"]
        for setting in cls.all_settings():
            default = cls.DEFAULT_TIMEOUT_S if setting.name == "timeout_s" else setting.default
            if setting.name == "timeout_s" and getattr(cls, "TIMEOUT_NOTE", None):
                default = cls.TIMEOUT_NOTE  # type: ignore[attr-defined]
            unit = f" ({setting.unit})" if setting.unit else ""
            lines.append(
                f"| `{setting.name}` | {setting.type_name} | {_shown(default)} | {setting.allowed} "
                f"| {setting.description}{unit} |"
            )
        lines.append("")
    return "\n".join(lines)


def needs_markdown() -> list[str]:
    """What each gate needs (`NEEDS`), and so where it can run; what each need means."""
    lines = ["### What each gate needs", "", "| gate | needs | where it runs |", "|---|---|---|"]
    for name, cls in GATES.items():
        needs = ", ".join(f"`{need}`" for need in Need if need in cls.NEEDS)
        where = (
            "a start's chain; any running server (`launch check`)" if name in HTTP_ONLY else "a start's chain"
        )
        lines.append(f"| `{name}` | {needs} | {where} |")
    lines += ["", "| need | the gate |", "|---|---|"]
    lines += [f"| `{need}` | {need.meaning} |" for need in Need]
    return [*lines, ""]


def _shown(default: object) -> str:
    return default if isinstance(default, str) and " " in default else f"`{default!r}`"
