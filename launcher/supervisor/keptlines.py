"""The engine lines kept in memory for the gates: absolute positions, bounded by count and size.

Why: a chatty engine prints ~1,000 lines/s for the server's whole life. Lines go in at the right
and the oldest leave at the left, one `popleft` each (O(1), never a list slice), so memory stays
flat and trimming costs nothing per line. Positions count every line since the start, kept or not,
so a reader resumes where it stopped even after older lines were dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import islice


class KeptLines:
    def __init__(self, max_lines: int, max_chars: int) -> None:
        self._lines: deque[str] = deque()
        self._chars = 0
        self._dropped = 0  # lines that left at the left: the position of the first kept line
        self.max_lines = max_lines
        self.max_chars = max_chars

    @property
    def end(self) -> int:
        """The position after the last line: how many lines were ever added."""
        return self._dropped + len(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def chars(self) -> int:
        return self._chars

    def extend(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._lines.append(line)
            self._chars += len(line)
        self._trim()

    def limit(self, max_lines: int, max_chars: int) -> None:
        """New bounds, applied at once (the gates are done: only a short tail is kept)."""
        self.max_lines, self.max_chars = max_lines, max_chars
        self._trim()

    def since(self, position: int) -> tuple[list[str], int]:
        """The kept lines from `position` on, and the position after them. Lines dropped before a
        reader got to them are skipped. Costs the number of lines returned, not the number kept."""
        count = self.end - max(position, self._dropped)
        if count <= 0:
            return [], self.end
        newest_first = list(islice(reversed(self._lines), count))
        newest_first.reverse()
        return newest_first, self.end

    def _trim(self) -> None:
        while self._lines and (len(self._lines) > self.max_lines or self._chars > self.max_chars):
            self._chars -= len(self._lines.popleft())
            self._dropped += 1
