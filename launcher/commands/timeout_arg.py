"""One convention for how long a command waits (`--timeout-s` of `set`, `rollback`, `status --wait`):
a positive, finite number of seconds, at most a week, refused with exit 2 before anything starts.

`float` took `-5`, `nan` and `inf` (issue 42): `set --apply --timeout-s -5` wrote the profile, sent the
reload and then reported a failure while the change went on to succeed; `nan` compares false with
every deadline, so it waits forever or not at all. A week is far above any start (the longest start
measured is minutes) and below what `threading`'s waits can take as a timeout.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click

MAX_TIMEOUT_S = 7 * 86400.0

if TYPE_CHECKING:  # click ≥ 8.2 types ParamType by what it converts to and from; 8.1 (allowed) does not
    _ParamType = click.ParamType[float, object]
else:
    _ParamType = click.ParamType


class Seconds(_ParamType):
    """A click type: a positive, finite number of seconds up to `maximum`."""

    name = "seconds"

    def __init__(self, maximum: float = MAX_TIMEOUT_S) -> None:
        self.maximum = maximum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(str(value))  # click gives a str, or the default (a float)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not (math.isfinite(number) and 0 < number <= self.maximum):
            self.fail(
                f"{value!r}: a positive, finite number of seconds, at most {self.maximum:g}",
                param,
                ctx,
            )
        return number


TIMEOUT_S = Seconds()
