"""The ERROR lines a request can make vLLM log, with what it answers (vLLM 0.26.0's source; the hermes
failure as the real 0.26.0 logged it in tests/data/real-vllm-0.26/tiny.log).

- A chat request for a model not served: `Error with model error=ErrorInfo(message='The model `x`
  does not exist.', type='NotFoundError', param='model', code=404)` (chat_completion/serving.py:228,
  the ErrorResponse's pydantic str); completions answer the same 404 without logging.
- A tool call the parser cannot load (`--sim-tool-fault malformed` with `tool_choice` auto):
  hermes logs `Error in extracting tool call from response.` with the json traceback
  (hermes_tool_parser.py:117, `logger.exception`) and returns the model's raw text, `<tool_call>`
  tags and all, as content with no tool calls (hermes_tool_parser.py:116-120).
"""

from __future__ import annotations

import json

from vllm_sim.logline import LogWriter
from vllm_sim.toolcalls import PlannedCall
from vllm_sim.tracebacks import SITE, STDLIB, Frame, traceback_text
from vllm_sim.versions import Dialect


def log_unknown_model(log: LogWriter, d: Dialect, model: str) -> None:
    message = f"The model `{model}` does not exist."  # pydantic's repr: quoted as Python quotes it
    info = f"ErrorInfo(message={message!r}, type='NotFoundError', param='model', code=404)"
    log.error(d.src("unknown_model"), f"Error with model error={info}")


def raw_tool_text(calls: list[PlannedCall]) -> str:
    """What a hermes-format model wrote: each call as `<tool_call>` JSON `</tool_call>`."""
    return "\n".join(
        f'<tool_call>\n{{"name": "{c.name}", "arguments": {c.arguments}}}\n</tool_call>' for c in calls
    )


def log_parse_failure(log: LogWriter, d: Dialect, raw: str) -> None:
    """hermes' `logger.exception`: the frames Python 3.12's json raises through, its own message."""
    inner = raw.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0]
    try:
        json.loads(inner)
    except json.JSONDecodeError as err:
        message = f"json.decoder.JSONDecodeError: {err}"
        extra = err.msg.startswith("Extra data")  # raised by decode itself, not by raw_decode
    else:
        return  # it parses: hermes returns the call, nothing is logged
    frames: tuple[Frame, ...] = (
        (f"{SITE}/vllm/tool_parsers/hermes_tool_parser.py", 92, "extract_tool_calls"),
        (f"{STDLIB}/json/__init__.py", 346, "loads"),
        (f"{STDLIB}/json/decoder.py", 338 if extra else 337, "decode"),
    )
    if not extra:
        frames = (*frames, (f"{STDLIB}/json/decoder.py", 353, "raw_decode"))
    text = "Error in extracting tool call from response.\n" + traceback_text(frames, message)
    log.error(d.src("tool_parse_error"), text)
