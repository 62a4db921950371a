"""Records cut by terminal wrapping (logs pasted from a terminal, `script` captures) put back together.

A wrapped record continues on following physical lines that do not start anything new
(`lines.is_record_like`). Only records whose text we need whole wait for continuations:
- the engine config line (several KB; capture sizes and mode sit near its end): it takes every
  following non-record line, since a wrap can fall where brackets happen to balance;
- the `non-default args` dict / old `args: Namespace(...)`: until brackets balance;
- a KV size or concurrency line whose numbers are cut;
- an echoed shell command continued with ` \\` (`python -m vllm.entrypoints.openai.api_server \\`): its
  next lines are the rest of the command, however they start.
In a log that is not wrapped the next line is a record, so nothing waits longer than one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher.logfacts import patterns as p
from launcher.logfacts.lines import Record, brackets_balanced, is_record_like, parse_segment, strip_outer

_MAX_LINES = 64
_MAX_CHARS = 256 * 1024


def needs_continuation(rec: Record) -> bool:
    msg = rec.msg
    if is_continued_command(rec):
        return True
    if p.ENGINE_CONFIG.match(msg):
        return True
    if msg.startswith(("non-default args: ", "args: Namespace(")):
        return not brackets_balanced(msg)
    if " KV cache size: " in msg:
        return not (p.KV_ONE_LINE.match(msg) or p.KV_SIZE_ONLY.match(msg))
    if msg.startswith("Maximum concurrency for "):
        return not p.KV_CONCURRENCY.match(msg) or not msg.endswith("x")
    return False


def is_continued_command(rec: Record) -> bool:
    return rec.level is None and rec.msg.endswith("\\") and p.COMMAND_LINE.search(rec.msg) is not None


@dataclass(slots=True)
class Pending:
    first: Record
    line_no: int
    parts: list[str] = field(default_factory=list)
    complete: bool = False
    _chars: int = 0

    def absorb(self, line: str) -> bool:
        """Take `line` as a continuation (True) or refuse it because it starts a new record."""
        if self.complete or len(self.parts) >= _MAX_LINES or self._chars > _MAX_CHARS:
            return False
        if is_continued_command(self.first):
            part = strip_outer(line).strip()
            self.parts.append(" " + part.removesuffix("\\"))
            self._chars += len(part)
            self.complete = not part.endswith("\\")
            return True
        if is_record_like(line):
            return False
        part = strip_outer(line).rstrip("\r")
        self.parts.append(part)
        self._chars += len(part)
        text = self.first.text + "".join(self.parts)
        rec = parse_segment(text)
        self.complete = not p.ENGINE_CONFIG.match(rec.msg) and not needs_continuation(rec)
        return True

    def record(self) -> Record:
        if not self.parts:
            return self.first
        head = self.first.text
        if is_continued_command(self.first):
            head = head.rstrip().removesuffix("\\")
        return parse_segment(head + "".join(self.parts))
