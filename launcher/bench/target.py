"""Which server to measure: a URL, or the host/port/served name of a profile. Never starts one.

The bench measures what already runs; a server that is not there is the operator's error (exit 2)
with a hint, not a traceback. The model comes from `--model`, else the profile's first served
name, else the first card of `/v1/models` (vllm-facts.md §7), which also gives `max_model_len`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from launcher.bench.client import Client
from launcher.errors import BadInput


class ServerUnreachable(BadInput):
    """Nothing answers at the bench's URL."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str
    model: str | None
    api_key: str | None
    origin: str  # "--url" or "profile NAME"


@dataclass(frozen=True, slots=True)
class Target:
    base_url: str
    model: str
    max_model_len: int | None
    origin: str


def from_url(url: str, model: str | None, api_key: str | None) -> Endpoint:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--url {url!r} is not an http(s) URL", hint="e.g. --url http://127.0.0.1:8000")
    base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return Endpoint(base, model, api_key, "--url")


def from_profile(
    profiles_dir: Path, state_dir: Path, name: str, model: str | None, api_key: str | None
) -> Endpoint:
    """What serves the profile now: its front door, else the engine where a parked change left it
    (`launch status`'s url), else engine.port (launcher/state/serving.py `reach_now`)."""
    from launcher.profile.plan import build_plan
    from launcher.state.serving import reach_now
    from launcher.state.store import StateStore

    plan = build_plan(profiles_dir, name)
    served = plan.served_model_names
    url = reach_now(StateStore(state_dir), name, plan.profile.data)
    return Endpoint(url, model or (served[0] if served else None), api_key, f"profile {name}")


def api_key_from_env(name: str | None) -> str | None:
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        raise BadInput(f"--api-key-env {name}: the variable is not set or empty", hint=f"export {name}=...")
    return value


async def discover(client: Client, endpoint: Endpoint) -> Target:
    """Check that the server answers and find the model name and its max_model_len."""
    cards = await _model_cards(client, endpoint)
    by_id = {str(c.get("id")): c for c in cards if isinstance(c, dict)}
    model = _chosen_model(endpoint, by_id)
    card = by_id.get(model, {})
    max_len = card.get("max_model_len")
    return Target(
        endpoint.base_url, model, int(max_len) if isinstance(max_len, int) else None, endpoint.origin
    )


async def _model_cards(client: Client, endpoint: Endpoint) -> list[Any]:
    """`/v1/models`'s cards; a server that does not answer, wants a key or lists no cards is refused."""
    try:
        status, payload = await client.get_json("/v1/models")
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        raise ServerUnreachable(
            f"nothing answers at {endpoint.base_url} ({endpoint.origin}): {type(err).__name__}: {err}",
            hint="start the server first (e.g. `launch --profile NAME`); bench measures a running server "
            "and never starts one",
        ) from err
    if status == 401:
        raise BadInput(
            f"{endpoint.base_url}/v1/models answered 401 Unauthorized",
            hint="pass the key's variable with --api-key-env NAME",
        )
    cards = payload.get("data") if isinstance(payload, dict) else None
    if status != 200 or not isinstance(cards, list):
        raise ServerUnreachable(
            f"{endpoint.base_url}/v1/models answered HTTP {status}, not a model list",
            hint="is this an OpenAI-compatible server (vLLM)?",
        )
    return cards


def _chosen_model(endpoint: Endpoint, by_id: dict[str, Any]) -> str:
    """The model asked for, which the server must serve, else the first it lists."""
    model = endpoint.model or next(iter(by_id), None)
    if model is None:
        raise ServerUnreachable(f"{endpoint.base_url}/v1/models lists no model", hint="pass --model NAME")
    if endpoint.model and by_id and endpoint.model not in by_id:
        raise BadInput(
            f"model {endpoint.model!r} is not served at {endpoint.base_url}",
            hint="served: " + ", ".join(sorted(by_id)),
        )
    return model
