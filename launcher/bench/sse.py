"""An OpenAI chat-completions SSE stream, read after the fact from timestamped network chunks.

The client only timestamps bytes as they arrive; everything here runs once the stream is over, so
JSON parsing never delays a timestamp. An SSE event takes the arrival time of the chunk that
completed it (its blank line), which is when the user could have seen it.

An *output event* is every chunk with a choice except the role-only first one
(`{"role": "assistant", "content": ""}`): vLLM sends one chunk per engine step of the request, and
a step's text may be empty — the EOS token's chunk, or byte-level tokens that do not yet decode to
valid UTF-8 (recorded from vLLM 0.26: `"content": ""` mid-stream). Each is still a decode step, so
each is an event; skipping them would merge two steps into one gap. The usage chunk
(`"choices": []`) is not an event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

# vLLM 0.33 streams `reasoning`; older releases `reasoning_content` (vllm-facts.md §7, §11).
REASONING_FIELDS = ("reasoning", "reasoning_content")


def sse_data(chunks: Sequence[tuple[float, bytes]]) -> Iterator[tuple[float, bytes]]:
    """(arrival time, payload of one `data:` line) for each complete SSE event."""
    buf = b""
    for arrived, data in chunks:
        buf = (buf + data).replace(b"\r\n", b"\n")
        while True:
            end = buf.find(b"\n\n")
            if end < 0:
                break
            raw, buf = buf[:end], buf[end + 2 :]
            for line in raw.split(b"\n"):
                if line.startswith(b"data:"):
                    yield arrived, line[5:].strip()


@dataclass(slots=True)
class StreamView:
    """What one streamed response said, and when (mutable while it is read, then left alone)."""

    event_times: list[float] = field(default_factory=list)
    first_content_time: float | None = None
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    content_events: int = 0
    reasoning_events: int = 0
    tool_call_deltas: int = 0
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    response_id: str | None = None
    done: bool = False
    error: str | None = None

    @property
    def content_text(self) -> str:
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    def take(self, arrived: float, payload: dict[str, Any]) -> None:
        """One event's payload: an error, or a chunk whose first choice may be an output event."""
        if "error" in payload:
            error = payload["error"]
            self.error = str(error.get("message") if isinstance(error, dict) else error)
            return
        self.response_id = self.response_id or payload.get("id")
        if isinstance(payload.get("usage"), dict):
            self.usage = payload["usage"]
        choices = payload.get("choices")
        if (
            isinstance(choices, list)
            and choices
            and isinstance(choices[0], dict)
            and self._take_choice(arrived, choices[0])
        ):
            self.event_times.append(arrived)

    def _take_choice(self, arrived: float, choice: dict[str, Any]) -> bool:
        """Keeps what the choice says; whether it is an output event (not the role-only opening)."""
        delta = choice.get("delta", {})
        if not isinstance(delta, dict):
            return False  # another server's shape: no output of vLLM's
        shown = self._take_delta(arrived, delta)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
            return True
        return shown or "role" not in delta

    def _take_delta(self, arrived: float, delta: dict[str, Any]) -> bool:
        """Keeps the delta's reasoning, content and tool-call parts; whether it showed any."""
        text = next((delta[f] for f in REASONING_FIELDS if delta.get(f)), None)
        if text:
            self.reasoning.append(str(text))
            self.reasoning_events += 1
        if delta.get("content"):
            self.content.append(str(delta["content"]))
            self.content_events += 1
            if self.first_content_time is None:
                self.first_content_time = arrived
        if delta.get("tool_calls"):
            self.tool_call_deltas += 1
        return bool(text or delta.get("content") or delta.get("tool_calls"))


def read_stream(chunks: Sequence[tuple[float, bytes]]) -> StreamView:
    view = StreamView()
    for arrived, data in sse_data(chunks):
        if data == b"[DONE]":
            view.done = True
            continue
        try:
            payload = json.loads(data)
        except ValueError:
            view.error = f"unparsable SSE data: {data[:120]!r}"
            continue
        if isinstance(payload, dict):
            view.take(arrived, payload)
    if not view.done and view.error is None:
        view.error = "the stream ended without `data: [DONE]`"
    return view
