"""Delivering one request's tokens: a whole JSON body, or SSE chunks as the engine steps produce them.

Streaming writes one chunk per engine step and stamps the ground truth just before each write
(the bytes reach the socket inside `write()`); tokens that show nothing (EOS, `</think>`,
tool-call markup) ride with the next chunk.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from vllm_sim import openai_api as api
from vllm_sim import tokenizer
from vllm_sim.generation import Channel, Plan, Tok
from vllm_sim.groundtruth import TruthRow
from vllm_sim.http_messages import Reply, Request, Response, StreamResponse, json_response
from vllm_sim.scheduler import Job, Step
from vllm_sim.server_state import ServerState
from vllm_sim.shapes_026 import body_026, chat_delta_026, text_chunk_choice


def engine_dead() -> Response:
    body = api.error_body(
        "The server had an error while processing your request.", "InternalServerError", 500
    )
    return json_response(body, 500)


# A request the engine finished with finish_reason "error" (`--sim-error-after-requests`): vLLM's
# `_raise_if_error` logs it and raises GenerationError("Internal server error"), which becomes a
# 500 `InternalServerError` body, or one `data: {"error": ...}` event in a stream (0.26.0
# entrypoints/generate/base/serving.py:170-177, :186-194; serve/utils/error_response.py:56-59).
GENERATION_ERROR = api.error_body("Internal server error", "InternalServerError", 500)


def _generation_failed(state: ServerState, job: Job) -> None:
    message = f"Request {job.rid} failed with an internal error during generation"
    state.log.error(state.dialect.src("generation_error"), message)


async def deliver(
    request: Request,
    state: ServerState,
    body: dict[str, Any],
    rid: str,
    prompt: api.Prompt,
    plan: Plan,
    chat: bool,
) -> Reply:
    words = frozenset(p.strip() for p in tokenizer.pieces(prompt.text))
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    job = Job(rid, prompt.ids, plan, words, max_tokens=limit if isinstance(limit, int) else 0)
    row = TruthRow(rid, "chat" if chat else "completions", bool(body.get("stream")))
    state.first_request()
    state.in_flight += 1
    state.scheduler.submit(job)
    try:
        if body.get("stream"):
            return await _stream(request, state, body, job, row, chat)
        return await _whole(state, job, row, chat)
    finally:
        state.in_flight -= 1
        if not job.finished:
            state.scheduler.abort(job)


def _usage(state: ServerState, job: Job) -> dict[str, Any]:
    cached = job.cached if state.cfg.prompt_tokens_details else None
    return api.usage(len(job.prompt_ids), job.emitted, cached)


def _truth(state: ServerState, job: Job, row: TruthRow) -> None:
    state.truth.write(
        row.as_dict(
            finish_reason=job.plan.finish_reason,
            prompt_tokens=len(job.prompt_ids),
            cached_tokens=job.cached,
            output_tokens=job.emitted,
            reasoning_tokens=job.plan.reasoning_tokens,
        )
    )


def _fingerprint(state: ServerState) -> str:
    return api.fingerprint(state.dialect.version, state.cfg.model)


def _headers(state: ServerState, rid: str) -> dict[str, str]:
    return {"X-Request-Id": rid} if state.cfg.request_id_headers else {}


async def _whole(state: ServerState, job: Job, row: TruthRow, chat: bool) -> Response:
    while True:
        step = await job.out.get()
        if step is None:
            return engine_dead()
        row.stamp(step.count)
        if step.done:
            break
    _truth(state, job, row)
    if job.plan.finish_reason == "error":
        _generation_failed(state, job)
        return json_response(GENERATION_ERROR, 500)
    model = state.cfg.model_label
    if chat:
        payload = api.chat_response(
            job.rid, model, job.plan, _usage(state, job), state.dialect.reasoning_field
        )
    else:
        payload = api.completion_response(job.rid, model, job.plan, _usage(state, job))
    if state.dialect.chunk_extras:
        payload = body_026(payload, _fingerprint(state), chat)
    return json_response(payload, headers=_headers(state, job.rid))


def _step_choice(
    state: ServerState, job: Job, tokens: list[Tok], chat: bool, parsed: bool
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """One engine step's delta (None: it shows nothing) and the chunk's choice around it."""
    if not chat:
        text = api.joined(tokens, Channel.CONTENT)
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None, "stop_reason": None}
        return {"text": text}, choice
    delta = api.chat_delta(tokens, job.plan, state.dialect.reasoning_field)
    if parsed:  # vLLM 0.26.0 counts each delta its streaming parser looked at
        key = ("streaming", "tool_call" if delta and "tool_calls" in delta else "no_tool_call")
        state.metrics.tool_invocations[key] = state.metrics.tool_invocations.get(key, 0) + 1
    return delta, {"index": 0, "delta": delta or {"content": ""}, "logprobs": None, "finish_reason": None}


@dataclass(frozen=True, slots=True)
class _StreamForm:
    """What every chunk of one stream looks like, decided once from the request and the dialect."""

    chat: bool
    created: int
    model: str
    obj: str
    parsed: bool  # the streaming tool parser looks at each delta
    continuous: bool  # usage on every chunk
    with_usage: bool  # a last chunk with the usage and no choice
    extras: bool  # 0.26.0's chunks (tests/data/real-vllm-0.26/eager/*.sse)
    stamp: dict[str, Any] | None  # the system_fingerprint, on the last chunk

    @classmethod
    def of(cls, state: ServerState, body: dict[str, Any], chat: bool) -> _StreamForm:
        options = body.get("stream_options") or {}
        extras = state.dialect.chunk_extras
        return cls(
            chat=chat,
            created=int(time.time()),
            model=state.cfg.model_label,
            obj="chat.completion.chunk" if chat else "text_completion",
            parsed=chat and bool(state.cfg.tool_parser and body.get("tools")),
            continuous=bool(options.get("continuous_usage_stats")),
            with_usage=bool(options.get("include_usage") or state.cfg.force_include_usage),
            extras=extras,
            stamp={"system_fingerprint": _fingerprint(state)} if extras else None,
        )


# The engine died mid-stream: one error event, and the stream ends without `[DONE]`.
ENGINE_CORE_ERROR = (
    b'data: {"error": {"message": "EngineCore encountered an issue.", '
    b'"type": "InternalServerError", "param": null, "code": 500}}\n\n'
)


async def _stream(
    request: Request, state: ServerState, body: dict[str, Any], job: Job, row: TruthRow, chat: bool
) -> StreamResponse:
    response = StreamResponse(
        headers={"content-type": "text/event-stream; charset=utf-8", **_headers(state, job.rid)}
    )
    await response.start(request)
    form = _StreamForm.of(state, body, chat)
    if await _write_steps(response, state, job, row, form):
        _truth(state, job, row)
        if form.with_usage:
            usage = _usage(state, job)
            await response.write(
                api.chunk(job.rid, form.created, form.model, [], form.obj, usage, form.stamp)
            )
        await response.write(b"data: [DONE]\n\n")
    await response.end()  # whichever way it went: an engine death's error event has no `[DONE]`
    return response


def _role_chunk(job: Job, form: _StreamForm) -> bytes:
    """The chunk that opens every chat stream: the assistant's role, no token yet. vLLM writes it
    with the engine's first output (0.26.0 entrypoints/openai/chat_completion/serving.py:487-571),
    so a request that waits (a paused or stopped engine) gets its headers and nothing more."""
    first = {
        "index": 0,
        "delta": {"role": "assistant", "content": ""},
        "logprobs": None,
        "finish_reason": None,
    }
    head = {"prompt_token_ids": None, "prompt_text": None} if form.extras else None
    return api.chunk(job.rid, form.created, form.model, [first], extra=head)


async def _write_steps(
    response: StreamResponse, state: ServerState, job: Job, row: TruthRow, form: _StreamForm
) -> bool:
    """One chunk per engine step that shows something; False where the stream ended in an error
    event instead (the engine died, or the request finished with "error")."""
    pending = 0
    opened = False
    while True:
        step = await job.out.get()
        if step is None:
            await response.write(ENGINE_CORE_ERROR)
            return False
        if form.chat and not opened:
            await response.write(_role_chunk(job, form))
        opened = True
        if step.done and job.plan.finish_reason == "error":
            _generation_failed(state, job)
            _truth(state, job, row)
            await response.write(f"data: {json.dumps(GENERATION_ERROR)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            return False
        pending += step.count
        if step.done and job.emitted == 0:  # ended before its first token (an abort): no chunk
            return True  # (0.26.0 chat_completion/serving.py:596-602, completion/serving.py:374-380)
        data = _step_chunk(state, job, step, form)
        if data is None:
            continue
        row.stamp(pending)  # write() hands the bytes to the socket before it may yield to drain
        pending = 0
        await response.write(data)
        if step.done:
            return True


def _step_chunk(state: ServerState, job: Job, step: Step, form: _StreamForm) -> bytes | None:
    """One engine step's chunk; None where the step shows nothing (it rides with the next)."""
    tokens = list(job.plan.tokens[step.start : step.start + step.count])
    delta, choice = _step_choice(state, job, tokens, form.chat, form.parsed)
    if step.done:
        choice["finish_reason"] = job.plan.finish_reason
        choice["stop_reason"] = job.plan.stop_reason
    elif delta is None:
        return None
    if form.extras:
        choice = (
            dict(choice, delta=chat_delta_026(choice["delta"]), token_ids=None)
            if form.chat
            else text_chunk_choice(choice)
        )
    use = _usage(state, job) if form.continuous else None
    last = form.stamp if step.done and not form.with_usage else None  # the fingerprint rides the last chunk
    return api.chunk(job.rid, form.created, form.model, [choice], form.obj, use, last)
