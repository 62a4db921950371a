"""HTTP shapes and /metrics families of a recorded real run against the simulator serving the same.

The requests are those scripts/real-vllm/record-026.sh made (record/eager: with the API key, and
once without it). Each reply is compared by status and by shape: every key path with the JSON types
it held (`choices[].message.content: str|null`), for a stream the union over its chunks; values (what
a random model said, ids, times) are not. /metrics is compared by family name and type (`# TYPE`).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from logdiff import Row

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
BROKEN = r'<tool_call>\{"name": "get_weather", "arguments": \{"city": Paris\}\}</tool_call>'
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"


def _broken(stream: bool) -> dict[str, Any]:
    return {"model": "tiny", "messages": WEATHER, "tools": TOOLS, "tool_choice": "auto", "max_tokens": 100,
            "temperature": 0, "stream": stream, "structured_outputs": {"regex": BROKEN}}  # fmt: skip


def _required(stream: bool) -> dict[str, Any]:
    ask = {"model": "tiny", "messages": WEATHER, "tools": TOOLS, "tool_choice": "required"}
    return {**ask, "max_tokens": 300, "temperature": 0, **({"stream": True} if stream else {})}


# (recorded file, path, JSON body or None for a GET) in the recording's order
REQUESTS: tuple[tuple[str, str, dict[str, Any] | None], ...] = (
    ("models.json", "/v1/models", None),
    ("version.json", "/version", None),
    ("chat-plain.json", CHAT, {"model": "tiny", "messages": HELLO, "max_tokens": 16, "temperature": 0}),
    (
        "chat-plain.sse",
        CHAT,
        {
            "model": "tiny",
            "messages": HELLO,
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),  # fmt: skip
    ("chat-tool-required.json", CHAT, _required(False)),
    ("chat-tool-required.sse", CHAT, _required(True)),
    (
        "completions.json",
        COMPLETIONS,
        {"model": "tiny", "prompt": "Hello", "max_tokens": 8, "temperature": 0},
    ),
    (
        "completions.sse",
        COMPLETIONS,
        {"model": "tiny", "prompt": "Hello", "max_tokens": 8, "temperature": 0, "stream": True},
    ),  # fmt: skip
    ("chat-unknown-model.json", CHAT, {"model": "nope", "messages": HELLO, "max_tokens": 4}),
    ("chat-hermes-broken.json", CHAT, _broken(False)),
    ("chat-hermes-broken.sse", CHAT, _broken(True)),
    ("no-key.json", "/v1/models", None),
    ("tokenize.json", "/tokenize", {"model": "tiny", "prompt": "Hello world"}),
    ("metrics-after.txt", "/metrics", None),
)


def fetch(base: str, path: str, body: dict[str, Any] | None, key: str | None) -> tuple[int, str]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None)
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace")


def replay(recording: Path, base: str, key: str | None) -> dict[str, tuple[int, str]]:
    """The simulator's answer to each recorded request (no key for `no-key.json`)."""
    return {
        name: fetch(base, path, body, None if name == "no-key.json" else key)
        for name, path, body in REQUESTS
        if (recording / name).exists()
    }


def paths(value: Any, prefix: str = "") -> dict[str, set[str]]:
    """Every key path with the JSON types it holds; list items share the path `name[]`."""
    out: dict[str, set[str]] = {}
    if isinstance(value, dict):
        out[prefix or "."] = {"object"}
        for key, item in value.items():
            for path, kinds in paths(item, f"{prefix}.{key}" if prefix else key).items():
                out.setdefault(path, set()).update(kinds)
    elif isinstance(value, list):
        out[prefix] = {"array"}
        for item in value:
            for path, kinds in paths(item, f"{prefix}[]").items():
                out.setdefault(path, set()).update(kinds)
    else:
        kind = {bool: "bool", int: "number", float: "number", str: "string"}.get(type(value), "null")
        out[prefix] = {kind}
    return out


def body_paths(text: str) -> dict[str, set[str]]:
    if text.lstrip().startswith("data:"):
        merged: dict[str, set[str]] = {}
        for line in text.splitlines():
            if line.startswith("data: {"):
                for path, kinds in paths(json.loads(line[6:])).items():
                    merged.setdefault(path, set()).update(kinds)
        return merged
    try:
        return paths(json.loads(text))
    except json.JSONDecodeError:
        return {".": {"text"}}


def _said(name: str, path: str) -> bool:
    """What the model wrote, not how vLLM shapes it: the recording's random-weight model never
    finished a `required` call (content until max_tokens), the simulator's model does."""
    return name.startswith("chat-tool-required") and bool(re.search(r"\.(content|tool_calls)", path))


def families(page: str) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^# TYPE (\S+) (\S+)$", page, re.MULTILINE)}


def http_rows(recording: Path, answers: dict[str, tuple[int, str]]) -> list[Row]:
    statuses = dict(
        (line.split()[0], line.split()[1]) for line in (recording / "http.txt").read_text().splitlines()
    )
    rows: list[Row] = []
    for name, (status, text) in answers.items():
        real_text = (recording / name).read_text(encoding="utf-8", errors="replace")
        if name.endswith(".txt"):
            real_f, sim_f = families(real_text), families(text)
            for family in sorted(real_f.keys() | sim_f.keys()):
                rows.append(Row("metrics", family, real_f.get(family, "absent"), sim_f.get(family, "absent")))
            continue
        rows.append(Row("http", f"{name} status", statuses.get(name, "?"), str(status)))
        real_p, sim_p = body_paths(real_text), body_paths(text)
        for path in sorted(real_p.keys() | sim_p.keys()):
            show = ["|".join(sorted(p[path])) if path in p else "absent" for p in (real_p, sim_p)]
            rows.append(Row("http", f"{name} {path}", *show, host=_said(name, path)))
    return rows
