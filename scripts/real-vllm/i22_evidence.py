"""Evidence helpers of check-i22.sh (standard library only: it runs with the GPU machine's python3).

i22_evidence.py gates STATUS.json   one line per gate of a launcher's status.json
i22_evidence.py bodies URL DIR      the gates' requests sent once more; raw bodies to DIR/bodies/
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gates.tool_cases import CASES, WEATHER_TOOL  # noqa: E402

SMOKE = {
    "arithmetic": "What is 17 + 25? Answer with the number only.",
    "chinese": "请用中文回答：一年有几个季节？",
    "code": "Write a Python function add(a, b) that returns the sum. Only the code.",
    "colours": "Name three primary colours.",
}


def gates(path: str) -> int:
    try:
        status = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        print(f"  no status: {err}")
        return 1
    for gate in status.get("gates") or []:
        print(
            f"  {gate.get('name')}: {gate.get('verdict')} ({gate.get('duration_s', 0):.1f} s): "
            f"{str(gate.get('summary'))[:400]}"
        )
    return 0


def post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, reply.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace")
    except OSError as err:
        return 0, str(err)


def bodies(url: str, folder: str) -> int:
    out = Path(folder) / "bodies"
    out.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as reply:
        model = json.load(reply)["data"][0]["id"]
    requests: dict[str, dict[str, Any]] = {f"tool-{c.name}": c.request(model, 256) for c in CASES}
    for name, text in SMOKE.items():
        requests[f"smoke-{name}"] = {
            "model": model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 128,
            "temperature": 0,
        }
    requests["think"] = {**requests["smoke-colours"], "chat_template_kwargs": {"enable_thinking": True}}
    requests["loop"] = {
        **requests["smoke-colours"],
        "chat_template_kwargs": {"system_prompt": "You are a broken record."},
    }
    requests["held-out-weather"] = {
        **requests["tool-auto"],
        "messages": [{"role": "user", "content": "Weather report for Lisbon, please."}],
        "tools": [WEATHER_TOOL],
    }
    for name, body in requests.items():
        status, text = post(url, body)
        (out / f"{name}.json").write_text(
            json.dumps(body, ensure_ascii=False) + "\n" + text, encoding="utf-8"
        )
        print(f"  {name}: HTTP {status} {_gist(text)}")
    return 0


def _gist(text: str) -> str:
    """The message's content and tool calls, or the first line of a stream or error."""
    try:
        message = json.loads(text)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return text.strip().splitlines()[-1][:160] if text.strip() else "(empty)"
    calls = [c["function"]["name"] + c["function"]["arguments"] for c in message.get("tool_calls") or []]
    return f"content={str(message.get('content'))[:100]!r} calls={calls}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "gates":
        sys.exit(gates(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "bodies":
        sys.exit(bodies(sys.argv[2], sys.argv[3]))
    sys.exit(__doc__)
