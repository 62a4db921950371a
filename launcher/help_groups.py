"""`--help` with options under headings, for the commands with many options (probe, bench).

click lists every option in one flat "Options" section. A small Command subclass that formats the
same help records under named sections is enough, and keeps click's own option declarations as
they are (docs/decisions/0007-help-option-groups.md says why not click-option-group).
"""

from __future__ import annotations

from typing import Any

import click


class GroupedCommand(click.Command):
    """A command whose `--help` lists options under `option_groups` headings, in that order.

    Options named in no group (`--help` at least) come last, under "Other options".
    """

    def __init__(self, *args: Any, option_groups: dict[str, list[str]] | None = None, **kwargs: Any) -> None:
        self.option_groups = option_groups or {}
        super().__init__(*args, **kwargs)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        placed: set[str | None] = set()
        for title, names in self.option_groups.items():
            unknown = [n for n in names if n not in records]
            assert not unknown, f"{self.name}: no option {unknown} for help group {title!r}"
            placed.update(names)
            rows = [r for n in names if (r := records[n]) is not None]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [r for n, r in records.items() if n not in placed and r is not None]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)
