"""The aiohttp app: vLLM's routes, API-key check, uvicorn-style access log (vllm-facts.md §2 #26, §7)."""

from __future__ import annotations

import platform
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from vllm_sim import serving
from vllm_sim.dev_routes import DEV_ROUTES, add_dev_routes
from vllm_sim.host_metrics import gc_lines, http_lines, process_lines
from vllm_sim.metrics_text import MetricsText
from vllm_sim.openai_api import dumps
from vllm_sim.server_state import STATE, ServerState

AUTH_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
# In the order 0.26.0 lists them (tiny.log), one line per method a route was registered with.
ROUTES: tuple[tuple[str, str], ...] = (
    ("/load", "GET"),
    ("/version", "GET"),
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/tokenize", "POST"),  # vLLM serves it from 0.6.0 on (0.26.0: record/eager/tokenize.json)
    ("/v1/models", "GET"),
    ("/ping", "GET"),
    ("/ping", "POST"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def routes_for(dev_mode: bool) -> tuple[tuple[str, str], ...]:
    """The routes the log lists: the dev ones (VLLM_SERVER_DEV_MODE=1) after SageMaker's and before
    the generate ones, as 0.26.0's build_app registers them (entrypoints/openai/api_server.py:231-247)."""
    if not dev_mode:
        return ROUTES
    split = ROUTES.index(("/v1/chat/completions", "POST"))
    return (*ROUTES[:split], *DEV_ROUTES, *ROUTES[split:])


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    keys = request.app[STATE].cfg.api_keys
    if keys and request.path.startswith(AUTH_PREFIXES):
        given = request.headers.get("Authorization", "")
        if given not in {f"Bearer {k}" for k in keys}:
            return web.json_response(dumps=dumps, data={"error": "Unauthorized"}, status=401)
    return await handler(request)


@web.middleware
async def access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.monotonic()
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        body = {"detail": "Not Found"} if exc.status == 404 else {"detail": exc.reason}
        response = web.json_response(dumps=dumps, data=body, status=exc.status)
    state = request.app[STATE]
    if response.status != 401 and request.match_info.route.resource is not None:  # the instrumentator's view
        sizes = (request.content_length or 0, response.body_length)
        state.http.observe(request.path, request.method, response.status, sizes, time.monotonic() - started)
    if state.cfg.access_log and request.path not in state.cfg.access_log_skip:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        host, port = (peer[0], peer[1]) if peer else ("127.0.0.1", 0)
        version = f"{request.version.major}.{request.version.minor}"
        state.log.raw(
            f'INFO:     {host}:{port} - "{request.method} {request.path_qs} HTTP/{version}" '
            f"{response.status} {response.reason}",
            stderr=False,
        )
    return response


async def health(request: web.Request) -> web.Response:
    return web.Response(status=503 if request.app[STATE].engine_dead else 200)


async def version(request: web.Request) -> web.Response:
    return web.json_response(dumps=dumps, data={"version": request.app[STATE].dialect.version})


async def load(request: web.Request) -> web.Response:
    return web.json_response(dumps=dumps, data={"server_load": 0})


async def models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    cfg = state.cfg
    cards = [
        {
            "id": name,
            "object": "model",
            "created": state.created,
            "owned_by": "vllm",
            "root": cfg.model,
            "parent": None,
            "max_model_len": cfg.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{i:032x}",
                    "object": "model_permission",
                    "created": state.created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        for i, name in enumerate(cfg.card_names)
    ]
    return web.json_response(dumps=dumps, data={"object": "list", "data": cards})


async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    major, minor, patch = platform.python_version_tuple()
    text = (
        "\n".join(gc_lines())
        + "\n"
        + (
            "# HELP python_info Python platform information\n# TYPE python_info gauge\n"
            f'python_info{{implementation="CPython",major="{major}",minor="{minor}",patchlevel="{patch}",'
            f'version="{platform.python_version()}"}} 1.0\n'
        )
    )
    text += "\n".join(process_lines()) + "\n"
    renderer = MetricsText(state.dialect, state.cfg.model_label, state.cache_info)
    if state.cfg.log_stats:
        spec = state.scheduler.spec
        spec_values = (
            (spec.stats.drafts, spec.stats.draft_tokens, spec.stats.accepted, spec.stats.per_position)
            if spec
            else None
        )
        parser = bool(state.cfg.tool_parser)
        text += renderer.render(state.metrics, spec_values, parser, state.scheduler.requests)
    text += "\n".join(http_lines(state.http, state.metrics.created, state.dialect.created_families)) + "\n"
    if state.cfg.tool_parser and state.dialect.created_families:  # 0.26.0: after the HTTP families
        renderer.tool_counter(state.metrics)
        text += renderer.text()
    return web.Response(
        text=text, content_type="text/plain", charset="utf-8", headers={"X-Content-Type-Options": "nosniff"}
    )


async def not_found(request: web.Request) -> web.Response:
    return web.json_response(dumps=dumps, data={"detail": "Not Found"}, status=404)


def build_app(state: ServerState) -> web.Application:
    app = web.Application(middlewares=[access_log, authenticate], client_max_size=64 * 1024 * 1024)
    app[STATE] = state
    app.router.add_get("/health", health)
    app.router.add_get("/ping", health)
    app.router.add_post("/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/load", load)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", serving.chat_completions)
    app.router.add_post("/v1/completions", serving.completions)
    app.router.add_post("/tokenize", serving.tokenize)
    if state.cfg.dev_mode:
        add_dev_routes(app)
    return app
