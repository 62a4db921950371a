"""vLLM's development routes, served only with VLLM_SERVER_DEV_MODE=1 (vllm-facts.md §12): sleep
mode, the prefix-cache reset, `collective_rpc("reload_weights")`.

Each one is a utility call the engine core answers when it gets to it (a stopped or hung engine
core never does); the API server's own share of vLLM's `EngineCore.sleep` (pausing the scheduler,
which lives here) runs between the engine's two halves. 0.26.0 answers `/sleep` and `/wake_up`
with an empty 200; 0.33 with a small JSON body (the 0.33 reference notes; not source-checked).
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any

from vllm_sim import openai_api as api
from vllm_sim.engine_link import EngineCallFailed, EngineDead
from vllm_sim.http_messages import Request, Response, Router, json_response
from vllm_sim.server_state import ServerState

DEV_ROUTES: tuple[tuple[str, str], ...] = (
    ("/reset_prefix_cache", "POST"),
    ("/collective_rpc", "POST"),
    ("/sleep", "POST"),
    ("/wake_up", "POST"),
    ("/is_sleeping", "GET"),
)
_TRUE, _FALSE = ("1", "true", "on", "yes", "t", "y"), ("0", "false", "off", "no", "f", "n")


def _error(message: str, status: int, err_type: str, param: str | None = None) -> Response:
    return json_response(api.error_body(message, err_type, status, param), status)


def _failed(err: Exception) -> Response:
    """vLLM's generic exception handler: a failed call or a dead engine is a 500."""
    return _error(str(err), 500, "InternalServerError")


async def sleep(state: ServerState, request: Request) -> Response:
    """`POST /sleep?level=1&mode=abort` (0.26.0 entrypoints/serve/dev/sleep/api_router.py:21-29)."""
    raw_level, mode = request.query.get("level", "1"), request.query.get("mode", "abort")
    try:
        level = int(raw_level)
    except ValueError as err:  # int() in the route: vLLM's handler makes a ValueError a 400
        return _error(str(err), 400, "BadRequestError")
    try:
        await _sleep(state, level, mode)
    except (EngineCallFailed, EngineDead) as err:
        return _failed(err)
    if state.dialect.sleep_replies:
        return json_response({"status": "sleeping", "level": level})
    return Response(status=200)


async def _sleep(state: ServerState, level: int, mode: str) -> None:
    """`EngineCore.sleep` (0.26.0 v1/engine/core.py:860-896): pause the scheduler (which rejects a
    bad mode; `wait` holds the call until the running requests are done), then from level 1 on
    clear the caches as the pause does (`_reset_caches`, :806-819: the prefix cache with
    `reset_running_requests=True`, so requests `keep` froze are preempted and recompute after the
    wake), then the executor frees the memory."""
    scheduler = state.scheduler
    await state.engine.call("pause", level, mode, len(scheduler.running), len(scheduler.waiting))
    scheduler.pause(mode)
    while mode == "wait" and not scheduler.drained():
        await asyncio.sleep(0.005)
    stale = level >= 1 and state.cfg.faults.wake_fault == "stale-cache"
    if stale and scheduler.cache is not None:
        scheduler.cache.mark_stale()  # the fault: indexed blocks whose KV content is about to go
    elif level >= 1:
        scheduler.preempt_all()
        scheduler.reset_prefix_cache()
    await state.engine.call("sleep", level, level >= 1 and not stale)
    state.metrics.sleep_state = (1, level)


async def wake_up(state: ServerState, request: Request) -> Response:
    """`POST /wake_up[?tags=weights&tags=kv_cache]` (api_router.py:32-42)."""
    tags = request.query.getall("tags") or None
    state.log.info(state.dialect.src("wake_tags"), f"wake up the engine with tags: {tags}")
    try:
        resumed, weights_valid = await state.engine.call("wake_up", tags)
    except (EngineCallFailed, EngineDead) as err:
        return _failed(err)
    state.scheduler.garbage_weights = not weights_valid
    if resumed:
        state.scheduler.resume()
    state.metrics.sleep_state = (0, 0)  # AsyncLLM.wake_up records "awake" after any wake-up call
    if state.dialect.sleep_replies:
        return json_response({"status": "awake" if resumed else "sleeping", "tags": tags})
    return Response(status=200)


async def is_sleeping(state: ServerState, request: Request) -> Response:
    try:
        asleep = await state.engine.call("is_sleeping")
    except (EngineCallFailed, EngineDead) as err:
        return _failed(err)
    return json_response({"is_sleeping": bool(asleep)})


def _query_bool(request: Request, name: str) -> bool:
    raw = request.query.get(name, "false")
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    detail = {
        "type": "bool_parsing",
        "loc": ("query", name),
        "msg": "Input should be a valid boolean, unable to interpret input",
        "input": raw,
    }
    raise ValueError(f"1 validation error:\n  {detail}", name)


async def reset_prefix_cache(state: ServerState, request: Request) -> Response:
    """`POST /reset_prefix_cache` (dev/cache/api_router.py:20-43): `{"success": bool}`; it fails
    while running requests hold blocks, unless `reset_running_requests=true` preempts them."""
    try:
        running = _query_bool(request, "reset_running_requests")
        _query_bool(request, "reset_external")  # no KV connector here: nothing external to reset
    except ValueError as err:  # FastAPI's query validation, as vLLM's handler words it
        return _error(str(err.args[0]), 400, "Bad Request", str(err.args[1]))
    state.log.info(state.dialect.src("prefix_resetting"), "Resetting prefix cache...")
    if running:
        state.scheduler.preempt_all()
    try:
        ok = await state.engine.call("reset_prefix_cache", state.scheduler.used_blocks())
    except (EngineCallFailed, EngineDead) as err:
        return _failed(err)
    if ok:
        state.scheduler.reset_prefix_cache()
    return json_response({"success": bool(ok)})


async def collective_rpc(state: ServerState, request: Request) -> Response:
    """`POST /collective_rpc {"method": "reload_weights"}` (dev/rpc/api_router.py:23-54): how a
    level-2 sleeper gets real weights back; one result per worker."""
    try:
        body: Any = request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return _error(f"JSON decode error: {err}", 400, "Bad Request")
    method = body.get("method") if isinstance(body, dict) else None
    if method is None:
        return _error("Missing 'method' in request body", 400, "Bad Request")
    try:
        results = await state.engine.call("collective_rpc", str(method))
    except (EngineCallFailed, EngineDead) as err:
        return _failed(err)
    if method == "reload_weights":
        state.scheduler.garbage_weights = False
    return json_response({"results": results})


def add_dev_routes(router: Router, state: ServerState) -> None:
    for method, path, handler in (
        ("POST", "/reset_prefix_cache", reset_prefix_cache),
        ("POST", "/collective_rpc", collective_rpc),
        ("POST", "/sleep", sleep),
        ("POST", "/wake_up", wake_up),
        ("GET", "/is_sleeping", is_sleeping),
    ):
        router.add(method, path, partial(handler, state))
