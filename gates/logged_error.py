"""The exception vLLM logged while a gate ran: a gate sees `HTTP 500`, the operator needs vLLM's words.

vLLM answers a request that fails inside the server with a 500 and prints the traceback to its log
(0.26.0: `(APIServer pid=N) RuntimeError: Llama3JsonToolParser could not locate the bot token …`,
tests/data/real-vllm-0.26/h200-2/promotion/engine.log). A Python traceback ends with one line
`Type: message`; the last such line printed during the gate is the cause worth naming.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# An optional vLLM process prefix `(APIServer pid=8814) ` (or any `(Name pid=N) `), then a Python
# exception's closing line: a dotted type name ending in Error or Exception, a colon, the message.
_CLOSING_LINE = re.compile(
    r"^(?:\([\w:-]+ pid=\d+\) )?(?P<line>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): \S.*)$"
)
MAX_CHARS = 300


def last_exception(lines: Iterable[str]) -> str | None:
    """The last traceback's closing line among `lines` (without the process prefix), cut to
    MAX_CHARS; None when no traceback ended there."""
    found = None
    for line in lines:
        match = _CLOSING_LINE.match(line.rstrip())
        if match:
            found = match.group("line")
    if found is not None and len(found) > MAX_CHARS:
        found = found[: MAX_CHARS - 1] + "…"
    return found
