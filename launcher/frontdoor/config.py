"""Caddy's JSON config for one profile's front door, rendered from its `Door` (deterministic:
the same profile and state dir give the same bytes).

- One HTTP server on `[frontdoor] host:port`, plain HTTP/1.1 (TLS, if wanted, is in front of it).
- One `reverse_proxy` (`@id` PROXY_ID) whose only upstream dials `{file.TARGET}`: Caddy reads the
  target file on every attempt, so the launcher re-points it by rewriting the file, and a request
  held at the door sees the new engine at its next try (a config change would end it: 0017).
- `flush_interval: -1`: every SSE chunk reaches the client at once.
- `load_balancing.try_duration` = hold_s, tried every TRY_INTERVAL: while nothing listens where
  the door points (an engine starting, the hold socket), a request waits, its body unread.
- No health checks, active or passive: a candidate under trial answers /health 200 before its gates
  passed, and so does a sleeper; the launcher alone chooses where traffic goes.
- Only what clients need is forwarded (FORWARDED_PATHS): sleep mode's dev routes (/sleep,
  /wake_up, /collective_rpc, /server_info; vllm-facts.md §12) stay unreachable from the door.
- After hold_s (or when an engine fails mid-request) the client gets 503 with Retry-After and an
  OpenAI-shaped error body (vllm-facts.md §7), from `handle_errors`.
- The admin API on its unix socket or loopback port only, nothing persisted outside the state
  dir; logs to stderr (the journal under systemd).
"""

from __future__ import annotations

import json
from typing import Any

from launcher.frontdoor.door import Door

PROXY_ID = "vllm-gate-frontdoor"
SERVER_NAME = "frontdoor"
TRY_INTERVAL_MS = 250
FORWARDED_PATHS = ("/v1/*", "/health", "/metrics", "/version", "/tokenize", "/detokenize")
# What Caddy answers itself when it could not reach an engine: 502 (nothing listened for hold_s, or
# the engine closed the connection), 503 (no upstream), 504 (a dial timed out).
UNREACHED = ("502", "503", "504")
_LOG = {"writer": {"output": "stderr"}, "encoder": {"format": "json"}, "level": "INFO"}


def caddy_config(door: Door) -> dict[str, Any]:
    return {
        "admin": {"listen": door.admin.caddy_listen, "config": {"persist": False}},
        "logging": {
            "logs": {
                "default": {"writer": {"output": "stderr"}, "encoder": {"format": "json"}, "level": "INFO"}
            }
        },
        "apps": {
            "http": {
                # a stop of the door lets the streams in flight finish for as long as a drain would
                "grace_period": _duration(max(door.settings.drain_timeout_s, 0.001)),  # 0 is "forever"
                "servers": {SERVER_NAME: _server(door)},
            }
        },
    }


def config_text(door: Door) -> str:
    return json.dumps(caddy_config(door), indent=2, sort_keys=True) + "\n"


def _server(door: Door) -> dict[str, Any]:
    return {
        "listen": [door.listen],
        "protocols": ["h1"],
        "automatic_https": {"disable": True},
        "routes": [
            {"match": [{"path": list(FORWARDED_PATHS)}], "handle": [_proxy(door)], "terminal": True},
            {"handle": [_error_response(404, "NotFoundError", _not_forwarded())]},
        ],
        "errors": {"routes": [_unreached_route(door)]},
    }


def _unreached_route(door: Door) -> dict[str, Any]:
    """`handle_errors`: what Caddy answers itself when no engine answered becomes a 503 to retry."""
    retry_after_s = door.settings.retry_after_s
    message = (
        f"no model server answered behind this address (a start, a change or a restart is under way; "
        f"a request waits up to {door.settings.hold_s:g} s for one): retry after {retry_after_s} s"
    )
    return {
        "match": [{"vars": {"{http.error.status_code}": list(UNREACHED)}}],
        "handle": [_error_response(503, "ServiceUnavailableError", message, retry_after_s)],
    }


def _proxy(door: Door) -> dict[str, Any]:
    return {
        "@id": PROXY_ID,
        "handler": "reverse_proxy",
        "upstreams": [{"dial": "{file." + str(door.target_path) + "}"}],
        "flush_interval": -1,
        "load_balancing": {
            "try_duration": _duration(door.settings.hold_s),
            "try_interval": f"{TRY_INTERVAL_MS}ms",
        },
    }


def _error_response(status: int, kind: str, message: str, retry_after_s: int | None = None) -> dict[str, Any]:
    """A static answer in vLLM's error shape, `{"error": {message, type, param, code}}`."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    headers = {"Content-Type": ["application/json"]}
    if retry_after_s is not None:
        headers["Retry-After"] = [str(retry_after_s)]
    return {"handler": "static_response", "status_code": status, "headers": headers, "body": json.dumps(body)}


def _not_forwarded() -> str:
    return "not served at this address; it forwards " + ", ".join(FORWARDED_PATHS)


def _duration(seconds: float) -> str:
    """Caddy's duration syntax in whole milliseconds (`1e-05s` would not parse)."""
    return f"{round(seconds * 1000)}ms"
