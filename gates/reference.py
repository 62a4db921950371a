"""docs/gates.md's settings tables, generated from each gate's declared settings."""

from __future__ import annotations

from gates.registry import DEFAULT_ORDER, GATES


def reference_markdown() -> str:
    lines = [f"Default chain: `{', '.join(DEFAULT_ORDER)}` (set `gates.order` to change it).", ""]
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


def _shown(default: object) -> str:
    return default if isinstance(default, str) and " " in default else f"`{default!r}`"
