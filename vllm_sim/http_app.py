"""The app: vLLM's routes, the API-key check, uvicorn's access log and the instrumentator's counts
(vllm-facts.md §2 #26, §7, §15), served by `http_server`. The middlewares are plain wrapping functions:
the access log's line goes out with the response's head, as uvicorn writes it."""

from __future__ import annotations

import platform
import time
from functools import partial

from vllm_sim import serving
from vllm_sim.dev_routes import DEV_ROUTES, add_dev_routes
from vllm_sim.host_metrics import gc_lines, http_lines, process_lines
from vllm_sim.http_messages import Handler, Reply, Request, Response, Router, json_response, phrase
from vllm_sim.http_server import HttpServer, Limits
from vllm_sim.metrics_text import MetricsText
from vllm_sim.server_state import ServerState

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
MAX_BODY_BYTES = 64 * 1024 * 1024  # the simulator's own bound: vLLM (uvicorn, FastAPI) sets none


def routes_for(dev_mode: bool) -> tuple[tuple[str, str], ...]:
    """The routes the log lists: the dev ones (VLLM_SERVER_DEV_MODE=1) after SageMaker's and before
    the generate ones, as 0.26.0's build_app registers them (entrypoints/openai/api_server.py:231-247)."""
    if not dev_mode:
        return ROUTES
    split = ROUTES.index(("/v1/chat/completions", "POST"))
    return (*ROUTES[:split], *DEV_ROUTES, *ROUTES[split:])


async def authenticate(state: ServerState, handler: Handler, request: Request) -> Reply:
    """vLLM's API-key middleware: only the guarded prefixes, `Bearer KEY` exactly."""
    keys = state.cfg.api_keys
    if keys and request.path.startswith(AUTH_PREFIXES):
        given = request.headers.get("Authorization", "")
        if given not in {f"Bearer {k}" for k in keys}:
            return json_response({"error": "Unauthorized"}, 401)
    return await handler(request)


async def instrumented(state: ServerState, router: Router, handler: Handler, request: Request) -> Reply:
    """prometheus-fastapi-instrumentator's view: requests to a route that passed the key check."""
    started = time.monotonic()
    reply = await handler(request)
    if reply.status != 401 and router.has(request):
        sizes = (request.content_length or 0, reply.body_length)
        state.http.observe(request.path, request.method, reply.status, sizes, time.monotonic() - started)
    return reply


def access_line(state: ServerState, request: Request, status: int) -> None:
    """uvicorn's access log: `HOST:PORT - "METHOD PATH HTTP/V" STATUS PHRASE`, on stdout."""
    if state.cfg.access_log and request.path not in state.cfg.access_log_skip:
        host, port = request.peer
        state.log.raw(
            f'INFO:     {host}:{port} - "{request.method} {request.path_qs} HTTP/{request.http_version}" '
            f"{status} {phrase(status)}",
            stderr=False,
        )


async def health(state: ServerState, request: Request) -> Response:
    return Response(status=503 if state.engine_dead else 200)


async def version(state: ServerState, request: Request) -> Response:
    return json_response({"version": state.dialect.version})


async def load(state: ServerState, request: Request) -> Response:
    return json_response({"server_load": 0})


async def models(state: ServerState, request: Request) -> Response:
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
    return json_response({"object": "list", "data": cards})


async def metrics(state: ServerState, request: Request) -> Response:
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
    return Response(
        body=text.encode("utf-8"),
        content_type="text/plain; charset=utf-8",
        headers=(("x-content-type-options", "nosniff"),),
    )


def routes(state: ServerState) -> Router:
    """The routes in the order vLLM's app registers them (FastAPI answers 405 from the first)."""
    router = Router()
    for method, path, handler in (
        ("GET", "/health", health),
        ("GET", "/ping", health),
        ("POST", "/ping", health),
        ("GET", "/version", version),
        ("GET", "/load", load),
        ("GET", "/metrics", metrics),
        ("GET", "/v1/models", models),
        ("POST", "/v1/chat/completions", serving.chat_completions),
        ("POST", "/v1/completions", serving.completions),
        ("POST", "/tokenize", serving.tokenize),
    ):
        router.add(method, path, partial(handler, state))
    if state.cfg.dev_mode:
        add_dev_routes(router, state)
    return router


def build_server(state: ServerState) -> HttpServer:
    """The app behind its middlewares (the instrumentator outside the key check), on the server."""
    router = routes(state)
    app = partial(instrumented, state, router, partial(authenticate, state, router.dispatch))
    limits = Limits(state.cfg.keep_alive_s, MAX_BODY_BYTES, state.cfg.h11_max_event_bytes)
    return HttpServer(app, limits, state.log.raw, partial(access_line, state))
