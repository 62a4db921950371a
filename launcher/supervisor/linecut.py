"""Lines out of a stream of chunks, shared by the launcher's live log and the log keeper.

Why one module: the keeper writes `engine.log` and the launcher keeps lines for the gates; both
must cut the same line the same way (a line longer than `MAX_LINE_CHARS` is cut, the cut counted and
marked on it), and both read a pipe in whole lines so a secret split across two reads is still
masked.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

LINE_END = re.compile(r"\r\n|\r|\n")
LINE_END_KEPT = re.compile(r"(\r\n|\r|\n)")
# vLLM's longest lines (the engine config, the non-default args) are under 8 KiB.
MAX_LINE_CHARS = 64 * 1024
_MAX_PARTIAL = 1 << 20  # a "line" longer than this is passed on unended (bounded memory)


def cut_marker(cut: int) -> str:
    return f" [vllm-gate: {cut} characters cut]"


def whole_line_chunks(stream: IO[bytes]) -> Iterator[str]:
    """Decoded text ending at a line end ('\\n', or tqdm's '\\r'), read until EOF; an unended run
    over 1 MiB and the unended tail at EOF come out as they are."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character split by a read
    partial = ""
    while chunk := stream.read1(65536):  # type: ignore[attr-defined]
        text = partial + decoder.decode(chunk)
        cut = max(text.rfind("\n"), text.rfind("\r"))
        if cut < 0 and len(text) < _MAX_PARTIAL:
            partial = text
            continue
        end = cut + 1 if cut >= 0 else len(text)
        partial = text[end:]
        yield text[:end]
    if partial:
        yield partial


def file_text(complete: str) -> str:
    """Complete lines as the engine log stores them: one per line, empty ones dropped."""
    lines = [line for line in LINE_END.split(complete) if line]
    return "\n".join(lines) + "\n" if lines else ""


@dataclass
class _Unfinished:
    """The start of a line whose end has not arrived: at most MAX_LINE_CHARS kept, the rest counted."""

    head: str = ""
    cut: int = 0

    def add(self, text: str) -> None:
        room = MAX_LINE_CHARS - len(self.head)
        if room > 0:
            self.head += text[:room]
        self.cut += max(0, len(text) - max(room, 0))


class LineCutter:
    """Chunks in, complete lines out (per stream, so streams never interleave inside a line)."""

    def __init__(self) -> None:
        self._unfinished: dict[str, _Unfinished] = {}
        self.cut_lines = 0  # lines longer than MAX_LINE_CHARS
        self.cut_chars = 0  # characters dropped from them

    def feed(self, stream: str, chunk: str) -> str:
        """The complete lines this chunk ends ('' while a line is still open), each capped."""
        unfinished = self._unfinished.setdefault(stream, _Unfinished())
        cut = max(chunk.rfind("\n"), chunk.rfind("\r"))
        if cut < 0:
            unfinished.add(chunk)
            return ""
        head, carried = unfinished.head, unfinished.cut
        self._unfinished[stream] = rest = _Unfinished()
        rest.add(chunk[cut + 1 :])
        return self._cap(head + chunk[: cut + 1], carried)

    def flush(self) -> list[str]:
        """The source is gone: whatever was left without a line end is a line too."""
        left = [u for u in self._unfinished.values() if u.head]
        self._unfinished.clear()
        return [self._cap(u.head + "\n", u.cut) for u in left]

    def _cap(self, complete: str, carried_cut: int) -> str:
        """Each line at most MAX_LINE_CHARS, with a marker saying how much was cut; line ends kept."""
        if not carried_cut and len(complete) <= MAX_LINE_CHARS:
            return complete
        parts = LINE_END_KEPT.split(complete)
        for index in range(0, len(parts), 2):
            line = parts[index]
            cut = max(0, len(line) - MAX_LINE_CHARS) + (carried_cut if index == 0 else 0)
            if cut:
                parts[index] = line[:MAX_LINE_CHARS] + cut_marker(cut)
                self.cut_lines += 1
                self.cut_chars += cut
        return "".join(parts)
