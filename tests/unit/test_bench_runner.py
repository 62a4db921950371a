"""The order of a bench run (launcher/bench/runner.py) against a scripted engine on a real loopback
socket: what is calibrated, sent cold, warmed up and timed, how often /metrics is read around it,
and what the run notes or flags when the server does not cooperate. No clock is judged: the engine
answers instantly and the tests count and read requests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from launcher.bench import checks
from launcher.bench.client import Client
from launcher.bench.options import BenchOptions
from launcher.bench.record import RequestRecord
from launcher.bench.results import RunResult
from launcher.bench.runner import Runner
from launcher.bench.target import Target
from launcher.bench.workload import ContextSpec
from tests.scripted_http import InstantVllm, Reply, Request, ScriptedHttp

SHORT = ContextSpec("short", 0)
DOC = ContextSpec("1k", 1000)


def run(
    engine: InstantVllm, options: BenchOptions, max_model_len: int | None = 32768
) -> tuple[RunResult, Runner]:
    async def main() -> tuple[RunResult, Runner]:
        async with ScriptedHttp(engine) as server, Client(server.url) as client:
            target = Target(server.url, "m", max_model_len, "--url")
            runner = Runner(client, target, options, run_id="t1")
            return await runner.run(), runner

    return asyncio.run(main())


def options(**changes: object) -> BenchOptions:
    defaults: dict[str, object] = dict(
        concurrency=(1, 2), contexts=(SHORT,), rounds=2, prompts=3, max_tokens=4, temperature=0.7
    )
    return BenchOptions(**{**defaults, **changes})  # type: ignore[arg-type]


def user_texts(chats: list[dict[str, object]]) -> list[str]:
    return [str(c["messages"][-1]["content"]) for c in chats]  # type: ignore[index]


def test_a_run_sends_cold_prompts_then_the_set_once_then_every_round_and_plans_exactly_that() -> None:
    engine = InstantVllm()
    result, runner = run(engine, options())
    texts = user_texts(engine.chats)
    assert len(engine.chats) == runner.planned([SHORT]) == 2 + 3 + 2 * 3 + 2 * 3
    cold, warm_up, timed = texts[:2], texts[2:5], texts[5:]
    assert all(t.startswith("[cold ") for t in cold) and len(set(cold)) == 2
    headers = sorted(t.split("\n")[0] for t in warm_up)
    assert headers == [f"[bench t1 | short | prompt {k} of 3]" for k in (1, 2, 3)]
    rounds = [sorted(timed[k : k + 3]) for k in range(0, 12, 3)]
    assert rounds == [sorted(warm_up)] * 4, "every round of every level runs the set the warm-up ran"
    assert not any(c["max_tokens"] == 1 for c in engine.chats), "a short context needs no calibration"
    assert engine.scrapes == 1 + 2 + 2 * 2 * 2  # the run, around cold, around each round of each level
    assert [(c.context, c.concurrency, len(c.rounds)) for c in result.cells] == [
        ("short", 1, 2),
        ("short", 2, 2),
    ]
    assert [len(r.records) for c in result.cells for r in c.rounds] == [3, 3, 3, 3]
    assert result.colds[0].proof.startswith("cold proven: 0 of ") and result.findings == ()


def test_each_round_counts_only_its_own_requests_on_the_servers_counters() -> None:
    engine = InstantVllm()
    result, _ = run(engine, options(concurrency=(2,)))
    for round_ in result.cells[0].rounds:
        assert round_.delta.prefix_queries == sum(r.prompt_tokens or 0 for r in round_.records)
        assert round_.delta.requests == 3


def test_copies_of_a_prompt_get_their_own_seed_and_greedy_sends_none() -> None:
    engine = InstantVllm()
    run(engine, options(concurrency=(2,), prompts=1, rounds=1))
    timed = engine.chats[-2:]
    assert user_texts(timed)[0] == user_texts(timed)[1]
    assert timed[0]["seed"] != timed[1]["seed"], "two copies in flight: the same prompt, different seeds"
    greedy = InstantVllm()
    run(greedy, options(concurrency=(2,), prompts=1, rounds=1, temperature=0.0))
    assert not any("seed" in c for c in greedy.chats)


def test_identical_greedy_copies_are_flagged() -> None:
    result, _ = run(InstantVllm(), options(concurrency=(2,), prompts=1, rounds=1, temperature=0.0))
    assert checks.Flag.SAME_SEQUENCE in {f.flag for f in result.cells[0].findings}


def test_a_context_that_does_not_fit_is_skipped_with_its_arithmetic() -> None:
    engine = InstantVllm()
    result, runner = run(engine, options(contexts=(SHORT, DOC)), max_model_len=1000)
    assert result.notes == (
        "context 1k skipped: 1000 prompt + 4 output tokens do not fit max_model_len 1000",
    )
    assert [c.context for c in result.cells] == ["short", "short"]
    assert len(engine.chats) == runner.planned([SHORT]), "nothing of the skipped context is sent"


def test_a_long_context_is_calibrated_once_per_language_before_anything_else() -> None:
    engine = InstantVllm(tokens_per_word=2.0)
    result, runner = run(engine, options(contexts=(DOC,), concurrency=(1,), rounds=1, prompts=2))
    probes = [c for c in engine.chats if c["max_tokens"] == 1]
    assert engine.chats[: len(probes)] == probes and len(probes) == 2
    assert set(result.token_ratios) == {"en", "zh"} and all(r > 0 for r in result.token_ratios.values())
    assert len(engine.chats) == runner.planned([DOC])


def test_a_probe_the_server_refuses_as_too_long_shrinks_and_is_sent_again() -> None:
    engine = InstantVllm(refuse_probe_above=300)
    result, _ = run(
        engine, options(contexts=(DOC,), concurrency=(1,), rounds=1, prompts=1), max_model_len=20000
    )
    probes = [len(user_texts([c])[0]) for c in engine.chats if c["max_tokens"] == 1]
    assert len(probes) > 2 and probes[1] < probes[0], "a 400 shrinks the probe to a quarter"
    assert set(result.token_ratios) == {"en", "zh"} and result.notes == ()


def test_a_probe_that_fails_otherwise_leaves_lengths_estimated_and_says_so() -> None:
    engine = InstantVllm(probe_status=500)
    result, _ = run(engine, options(contexts=(DOC,), concurrency=(1,), rounds=1, prompts=1))
    assert len([c for c in engine.chats if c["max_tokens"] == 1]) == 2, "a 500 is not retried smaller"
    assert result.token_ratios == {}
    assert result.notes == tuple(
        f"token calibration ({lang}) failed (HTTP 500: engine dead): lengths are estimates"
        for lang in ("en", "zh")
    )


def test_metrics_that_cannot_be_read_are_a_note_and_leave_the_cold_phase_unproven() -> None:
    result, _ = run(InstantVllm(metrics=False), options(concurrency=(1,), rounds=1))
    assert result.notes == (
        "/metrics unreadable (/metrics answered HTTP 404): no hit rate, acceptance or cold proof",
    )
    assert [f.flag for f in result.colds[0].findings] == [checks.Flag.COLD_UNPROVEN]


def test_a_cold_phase_the_prefix_cache_answered_is_flagged() -> None:
    result, _ = run(InstantVllm(cold_hits=True), options(concurrency=(1,), rounds=1))
    [finding] = result.colds[0].findings
    assert finding.flag is checks.Flag.COLD_NOT_COLD and finding.message.startswith("cold was not cold: ")


def test_a_reasoning_model_is_noticed_and_a_small_budget_flagged() -> None:
    result, _ = run(InstantVllm(reasoning=True), options(concurrency=(1,), rounds=1))
    assert result.reasoning
    assert [f.flag for f in result.findings] == [checks.Flag.SMALL_MAX_TOKENS]
    assert result.cells[0].records[0].reasoning_tokens > 0


def test_a_server_started_a_minute_ago_is_flagged_fresh() -> None:
    result, _ = run(InstantVllm(started=time.time() - 60), options(concurrency=(1,), rounds=1))
    assert [f.flag for f in result.findings] == [checks.Flag.FRESH_SERVER]


def test_the_run_records_are_handed_to_the_sink_round_by_round() -> None:
    batches: list[list[str]] = []

    async def main() -> None:
        async with ScriptedHttp(InstantVllm()) as server, Client(server.url) as client:
            target = Target(server.url, "m", None, "--url")
            runner = Runner(client, target, options(concurrency=(1,)), run_id="s", sink=phases)
            await runner.run()

    def phases(records: Sequence[RequestRecord]) -> None:
        batches.append([str(r.tag.phase) for r in records])

    asyncio.run(main())
    assert batches == [["cold"], ["cold"], ["warmup"] * 3, ["timed"] * 3, ["timed"] * 3]


def test_request_ids_are_the_runs_and_never_repeat() -> None:
    seen: list[str] = []

    def answer(request: Request) -> Reply:
        if request.path != "/metrics":
            seen.append(request.headers["x-request-id"])
        return engine(request)

    engine = InstantVllm()

    async def main() -> None:
        async with ScriptedHttp(answer) as server, Client(server.url) as client:
            await Runner(client, Target(server.url, "m", None, "--url"), options(), run_id="r9").run()

    asyncio.run(main())
    assert len(seen) == len(set(seen)) == 17 and all(s.startswith("bench-r9-") for s in seen)
