"""`POST /v1/chat/completions` and `POST /v1/completions`: validate like vLLM, then plan the answer.

Checks run in vLLM's order (model name, request validators, the tool-parser gate, context
length); the planned tokens then go to the scheduler and `delivery` writes them out.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from vllm_sim import openai_api as api
from vllm_sim.answers import Answer, compose, is_chinese
from vllm_sim.delivery import deliver, engine_dead
from vllm_sim.generation import Plan, build_plan
from vllm_sim.http_messages import Reply, Request, Response, json_response
from vllm_sim.request_errors import log_parse_failure, log_unknown_model, raw_tool_text
from vllm_sim.server_state import ServerState
from vllm_sim.structured import forced_text, hermes_calls, hermes_raw_calls
from vllm_sim.toolcalls import (
    PlannedCall,
    RequestInvalid,
    apply_fault,
    as_text,
    check_server_support,
    plan_calls,
    validate_tool_usage,
)


def _error(message: str, status: int, err_type: str, param: str | None = None) -> Response:
    return json_response(api.error_body(message, err_type, status, param), status)


def _body(request: Request) -> dict[str, Any]:
    try:
        body = request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestInvalid(f"Invalid JSON body: {err}") from err
    if not isinstance(body, dict):
        raise RequestInvalid("The request body must be a JSON object.")
    return body


def _check_common(state: ServerState, body: dict[str, Any]) -> None:
    model = body.get("model")
    if model and model not in state.cfg.card_names:
        raise LookupError(model)
    if body.get("stream_options") and not body.get("stream"):
        raise RequestInvalid("Stream options can only be defined when `stream=True`.", "stream_options")
    if body.get("n") not in (None, 1):
        raise RequestInvalid("vllm-sim serves n=1 only.", "n")


def _max_tokens(state: ServerState, body: dict[str, Any], prompt_len: int) -> int:
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    limit = state.cfg.max_model_len
    if asked is None:
        asked = limit - prompt_len
    if not isinstance(asked, int) or asked < 1 or prompt_len + asked > limit:
        raise RequestInvalid(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_len + (asked if isinstance(asked, int) else 0)} tokens ({prompt_len} in the messages, "
            f"{asked} in the completion). Please reduce the length of the messages or completion.",
            "max_tokens",
        )
    return asked


def _refused(err: RequestInvalid | LookupError) -> Response:
    """vLLM's 400 for a request its checks refused, or its 404 for a model it does not serve."""
    if isinstance(err, RequestInvalid):
        return _error(err.message, 400, "BadRequestError", err.param)
    return _error(f"The model `{err.args[0]}` does not exist.", 404, "NotFoundError", "model")


def _plan(
    answer: Answer,
    calls: list[PlannedCall],
    body: dict[str, Any],
    rng: random.Random,
    max_tokens: int,
    question: str,
    named_call: bool,
) -> Plan:
    """The answer's tokens as the request bounds them (min_tokens, ignore_eos, stop strings)."""
    return build_plan(
        answer,
        calls,
        max_tokens=max_tokens,
        min_tokens=int(body.get("min_tokens") or 0),
        ignore_eos=bool(body.get("ignore_eos")),
        stop=_stops(body),
        rng=rng,
        lang="zh" if is_chinese(question) else "en",
        named_call=named_call,
    )


def _stops(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop") or []
    return [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str)]


@dataclass(frozen=True, slots=True)
class _ChatAsk:
    """A chat request that passed vLLM's checks: what its answer is planned from."""

    body: dict[str, Any]
    prompt: api.Prompt
    max_tokens: int
    tools: list[Any]
    choice: Any  # tool_choice: absent, "auto", "none", "required" or a named function
    parser_ready: bool  # --enable-auto-tool-choice with a --tool-call-parser

    @property
    def parses_calls(self) -> bool:
        """The tool parser reads the answer for calls: tools offered, and the model's to choose."""
        return self.parser_ready and bool(self.tools) and self.choice in (None, "auto")


async def chat_completions(state: ServerState, request: Request) -> Reply:
    if state.engine_dead:
        return engine_dead()
    try:
        ask = _checked_chat(state, _body(request))
    except RequestInvalid as err:
        return _refused(err)
    except LookupError as err:
        log_unknown_model(state.log, state.dialect, str(err.args[0]))
        return _refused(err)
    rng = random.Random(api.seed_for(ask.prompt, ask.body))
    answer, calls = _chat_answer(state, ask, rng)
    plan = _plan(
        answer, calls, ask.body, rng, ask.max_tokens, ask.prompt.question, isinstance(ask.choice, dict)
    )
    _count_unstreamed_tool_call(state, ask, plan)
    rid = api.request_id("chatcmpl", request.headers.get("X-Request-Id"), state.dialect.request_id_hex)
    return await deliver(request, state, ask.body, rid, ask.prompt, plan, chat=True)


def _checked_chat(state: ServerState, body: dict[str, Any]) -> _ChatAsk:
    """vLLM's checks of a chat request in its order (model, request validators, the tool-parser gate,
    context length); the first that fails raises."""
    _check_common(state, body)
    validate_tool_usage(body)
    choice, tools = body.get("tool_choice"), body.get("tools") or []
    parser_ready = state.cfg.auto_tools and bool(state.cfg.tool_parser)
    refusal = check_server_support(choice if tools else None, parser_ready, state.cfg.auto_tools)
    if refusal:
        raise RequestInvalid(refusal)
    prompt = api.render_chat(body.get("messages"), tools or None)
    return _ChatAsk(body, prompt, _max_tokens(state, body, len(prompt.ids)), tools, choice, parser_ready)


def _chat_answer(state: ServerState, ask: _ChatAsk, rng: random.Random) -> tuple[Answer, list[PlannedCall]]:
    """What the model writes: its answer (thinking first where enabled), the calls the parser reads
    from it with `--sim-tool-fault` applied, or a structured-output regex's literal text instead."""
    kwargs = ask.body.get("chat_template_kwargs") or {}
    thinking = state.cfg.reasoning and kwargs.get("enable_thinking", True) is not False
    prompt = ask.prompt
    answer = compose(
        prompt.text, prompt.question, rng, reasoning=thinking, degenerate=state.cfg.faults.degenerate
    )
    calls = (
        plan_calls(ask.tools, ask.choice, prompt.question, prompt.last_role, rng)
        if ask.parser_ready and ask.tools
        else []
    )
    fault = _tool_fault_now(state, ask)
    answer, calls = _tool_fault(state, ask, answer, apply_fault(calls, fault), fault)
    if (forced := forced_text(ask.body)) is not None:
        answer, calls = _forced(state, ask.body, forced, ask.parses_calls)
    if ask.body.get("include_reasoning") is False:
        answer = Answer(answer.kind, answer.content)
    return answer, calls


def _tool_fault_now(state: ServerState, ask: _ChatAsk) -> str | None:
    """The tool fault of this request: none for the first `--sim-tool-fault-after-requests`."""
    if ask.tools:
        state.tool_asks += 1
    after = state.cfg.faults.tool_fault_after_requests
    return state.cfg.faults.tool_fault if after is None or state.tool_asks > after else None


def _tool_fault(
    state: ServerState, ask: _ChatAsk, answer: Answer, calls: list[PlannedCall], fault: str | None
) -> tuple[Answer, list[PlannedCall]]:
    """`--sim-tool-fault text`: the calls written as plain text; `malformed`: markup the parser
    cannot load, so vLLM returns the raw text as content and logs why."""
    if calls and fault == "text":
        return Answer("tool_text", as_text(calls), answer.reasoning), []
    if calls and fault == "malformed" and ask.choice in (None, "auto") and not ask.body.get("stream"):
        # vLLM's streaming parser does not check, and streams the broken arguments (record/eager)
        text = raw_tool_text(calls)
        log_parse_failure(state.log, state.dialect, text)
        return Answer("tool_text", text, answer.reasoning), []
    return answer, calls


def _count_unstreamed_tool_call(state: ServerState, ask: _ChatAsk, plan: Plan) -> None:
    """vLLM 0.26.0 counts a whole answer to a request with tools as a tool call or not (a streamed
    one: each delta its parser looks at, in `delivery`)."""
    if state.cfg.tool_parser and ask.tools and not ask.body.get("stream"):
        key = ("non_streaming", "tool_call" if plan.calls else "no_tool_call")
        state.metrics.tool_invocations[key] = state.metrics.tool_invocations.get(key, 0) + 1


def _forced(
    state: ServerState, body: dict[str, Any], text: str, parse: bool
) -> tuple[Answer, list[PlannedCall]]:
    """A literal structured-output regex: the model writes `text`; hermes reads calls from it, or
    logs why it cannot and returns the text as content (record/eager/chat-hermes-broken.json)."""
    calls = hermes_calls(text) if parse and "<tool_call>" in text else []
    if calls is None and body.get("stream"):  # the streaming parser streams what it finds, unchecked
        calls = hermes_raw_calls(text)
    if calls is None:
        log_parse_failure(state.log, state.dialect, text)
        return Answer("tool_text", text), []
    return Answer("tool_text", text.split("<tool_call>", 1)[0] if calls else text), calls


async def completions(state: ServerState, request: Request) -> Reply:
    try:
        if state.engine_dead:
            return engine_dead()
        body = _body(request)
        _check_common(state, body)
        prompt = api.render_completion(body.get("prompt"))
        max_tokens = _max_tokens(state, body, len(prompt.ids))
    except (RequestInvalid, LookupError) as err:
        return _refused(err)
    rng = random.Random(api.seed_for(prompt, body))
    answer = compose(
        prompt.text, prompt.question, rng, reasoning=False, degenerate=state.cfg.faults.degenerate
    )
    answer = Answer(answer.kind, " " + answer.content)
    plan = _plan(answer, [], body, rng, max_tokens, prompt.question, False)
    rid = api.request_id("cmpl", request.headers.get("X-Request-Id"), state.dialect.request_id_hex)
    return await deliver(request, state, body, rid, prompt, plan, chat=False)


async def tokenize(state: ServerState, request: Request) -> Response:
    """`POST /tokenize` (vLLM 0.26.0 `serve/tokenize`): `messages` (chat template applied) or
    `prompt`; answers `{"count", "max_model_len", "tokens", "token_strs"}`, as recorded on the H200."""
    try:
        body = _body(request)
        _check_common(state, body)
        if "messages" in body:
            prompt = api.render_chat(body.get("messages"), body.get("tools") or None)
        else:
            prompt = api.render_completion(body.get("prompt"))
    except (RequestInvalid, LookupError) as err:
        return _refused(err)
    ids = list(prompt.ids)
    data = {"count": len(ids), "max_model_len": state.cfg.max_model_len, "tokens": ids, "token_strs": None}
    return json_response(data)
