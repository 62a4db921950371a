"""The third H200 session (vLLM 0.26.0, 2026-12-02, issue 22) re-judged from its recordings in
tests/data/real-vllm-0.26/h200-3/ (README there; docs/real-vllm.md tells each run): the trained
tiny-chat promoted by the default chain + tool_call + smoke, a wrong tool parser rejected with vLLM's
own words, and each bench trap recomputed from the real answers it fired on.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gates.graph_capture import GraphCaptureGate
from gates.logged_error import last_exception
from gates.outcome import Verdict
from gates.tool_cases import CASES, judge_reply, judge_stream
from launcher.bench import checks
from launcher.bench.checks import Flag
from launcher.bench.server_metrics import MetricsDelta
from launcher.logfacts.logfile import parse_file
from launcher.profile.candidate import expectations
from launcher.profile.plan import build_plan
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from tests.conftest import REPO
from tests.doubles import FakeClock, ScriptedLog, make_context
from tests.recorded_bench import Cells, degenerate_message, read_cells, rescore, scored_as_recorded

DATA = REPO / "tests" / "data" / "real-vllm-0.26" / "h200-3"
PROFILES = REPO / "scripts" / "real-vllm" / "profiles"
GOOD, BAD = "3b8e300979a2efe2", "bca86ead23e9b3ef"  # tiny-chat with hermes, and with llama3_json
BOT_TOKEN_ERROR = (
    "RuntimeError: Llama3JsonToolParser could not locate the bot token '<|python_tag|>' in the tokenizer."
)
GATES = ["kernel_marker", "graph_capture", "health", "tool_call", "smoke"]


def _status(path: Path) -> dict[str, Any]:
    status = read_record(path, STATUS, STATUS_OPTIONAL)
    assert status is not None, path
    return status


def _cells(folder: str) -> Cells:
    return read_cells(DATA / folder / "requests.jsonl.gz")


def _summary(folder: str) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((DATA / folder / "summary.json").read_text(encoding="utf-8"))
    return summary


def _flags(cell: dict[str, Any], flag: Flag) -> list[str]:
    return [f["message"] for f in cell["flags"] if f["flag"] == flag]


# --- steps 0-1: the default chain + tool_call + smoke on the real vLLM -> promoted ---


def test_the_trained_model_was_promoted_with_every_gate_passing() -> None:
    status = _status(DATA / "promotion" / "status-tiny-chat.json")
    assert (status["phase"], status["serving_fingerprint"]) == ("serving", GOOD)
    assert [(g["name"], g["verdict"]) for g in status["gates"]] == [(name, "pass") for name in GATES]
    by_name = {g["name"]: g for g in status["gates"]}
    assert by_name["tool_call"]["summary"] == (
        "ALL_PASS (auto, required, named, no_tool, auto_stream) on model tiny-chat"
    )
    cases = by_name["tool_call"]["evidence"]["cases"]
    assert all(case["ok"] for case in cases.values()) and len(cases) == 5
    assert cases["named"]["why"] == 'called get_weather({"city": "Paris"})'
    smoke = by_name["smoke"]["evidence"]["results"]
    assert smoke == dict.fromkeys(["arithmetic", "chinese", "code", "consistency", "concurrency"], "ok")
    assert build_plan(PROFILES, "tiny-chat").fingerprint() == GOOD  # the committed profile is what ran


def _body(name: str) -> tuple[dict[str, Any], str]:
    request, _, reply = (
        (DATA / "promotion" / "bodies" / f"{name}.json").read_text(encoding="utf-8").partition("\n")
    )
    return json.loads(request), reply


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_tool_call_judge_passes_vllms_recorded_answers(case: Any) -> None:
    """The gates' own requests, sent once more after the promotion; vLLM's bodies judged again."""
    request, reply = _body(f"tool-{case.name}")
    assert request == case.request("tiny-chat", 256)
    if case.stream:
        payloads = [line[len("data: ") :] for line in reply.splitlines() if line.startswith("data: ")]
        result = judge_stream(case, payloads)
    else:
        result = judge_reply(case, 200, reply)
    assert result.ok, result.why


def test_the_recorded_plain_answers_are_the_ones_smoke_asks_for() -> None:
    answers = {
        name: json.loads(_body(name)[1])["choices"][0]["message"]["content"]
        for name in ("smoke-arithmetic", "smoke-chinese", "smoke-code")
    }
    assert answers["smoke-arithmetic"] == "42"
    assert re.search(r"[\u4e00-\u9fff]", answers["smoke-chinese"])
    assert answers["smoke-code"].startswith("def add(a, b):") and "return a + b" in answers["smoke-code"]
    # a held-out city in a new phrasing: the model does not generalise (docs/real-vllm.md says how far)
    held_out = json.loads(_body("held-out-weather")[1])["choices"][0]["message"]
    assert not held_out.get("tool_calls") and "Lisbon" not in held_out["content"]
    assert held_out["content"].endswith('{"city": "Delhi"}}</tool_call>')  # a broken call, a trained city


def test_the_promotion_log_reads_as_it_did_on_the_device() -> None:
    facts, _ = parse_file(DATA / "promotion" / "engine.log")
    assert (facts.outcome, facts.failure_kind, facts.vllm_version) == ("ready", None, "0.26.0")
    assert facts.graphs_captured_by_mode == {"PIECEWISE": 51, "FULL": 51}
    plan = build_plan(PROFILES, "tiny-chat")
    clock = FakeClock()
    ctx = make_context(
        ScriptedLog(clock, current_facts=dict(facts.to_json())), clock, expect=expectations(plan)
    )
    outcome = GraphCaptureGate().check(ctx)
    assert outcome.verdict is Verdict.PASS, outcome.summary
    recorded = next(
        g
        for g in _status(DATA / "promotion" / "status-tiny-chat.json")["gates"]
        if g["name"] == "graph_capture"
    )
    assert recorded["summary"] == outcome.summary.split("\n")[0]


def test_the_carried_model_was_checked_before_the_run() -> None:
    text = (DATA / "promotion" / "verify.txt").read_text(encoding="utf-8")
    assert "gate cases: 13/14 pass" in text  # named: a schema-valid city other than Paris (the gate's rule)
    assert re.search(r"held-out phrasings: .*tool_call 0/6", text)


# --- step 2: a wrong tool parser -> rejected by tool_call, vLLM's words named, last-good serves ---


def test_the_rejection_names_vllms_own_error_and_last_good_serves() -> None:
    status = _status(DATA / "rejection" / "status-after.json")
    assert (status["phase"], status["serving_fingerprint"]) == ("serving_last_good", GOOD)
    assert status["rollback_reason"] == (
        f"candidate tiny-chat@{BAD} rejected by tool_call: auto: HTTP 500; required: HTTP 500; "
        "named: HTTP 500; no_tool: HTTP 500; auto_stream: no tool call; answered in text: ''; "
        f"vLLM logged: {BOT_TOKEN_ERROR}"
    )
    assert [(g["name"], g["verdict"]) for g in status["gates"]] == [(name, "pass") for name in GATES]
    set_text = (DATA / "rejection" / "set.txt").read_text(encoding="utf-8")
    assert 'args.tool_call_parser: "hermes" → "llama3_json"' in set_text
    assert "gate smoke: skip — not run: an earlier required gate failed" in set_text


def test_the_candidates_log_holds_the_cause_the_verdict_quotes() -> None:
    with gzip.open(DATA / "rejection" / "engine.log.gz", "rt", encoding="utf-8") as text:
        lines = text.read().splitlines()
    starts = [i for i, line in enumerate(lines) if "'tool_call_parser':" in line]
    # production, production again after the probe, the candidate, last-good
    assert ["llama3_json" in lines[i] for i in starts] == [False, False, True, False]
    candidate = lines[starts[2] : starts[3]]
    assert sum(BOT_TOKEN_ERROR in line for line in candidate) == 5  # once per chat request of the gate
    assert last_exception(candidate) == BOT_TOKEN_ERROR
    assert not any(BOT_TOKEN_ERROR in line for line in lines[: starts[2]] + lines[starts[3] :])


def test_the_history_reads_promotion_rejection_and_last_good_in_order() -> None:
    rows = (DATA / "rejection" / "history.txt").read_text(encoding="utf-8").splitlines()
    events = [row.split()[2] for row in rows]
    assert events[-12:] == [
        "promoted",
        "probe_finished",
        "reload",
        "engine_stopped",
        "start",
        "gates",
        "engine_stopped",
        "rejected",
        "rollback",
        "start",
        "gates",
        "serving_last_good",
    ]
    assert f"gates              FAILED candidate tiny-chat@{BAD}" in rows[-7]
    assert rows[-1].endswith(f"serving_last_good  last-good tiny-chat@{GOOD}")


def test_a_rejected_change_stayed_in_the_file_and_reached_the_child_profiles(tmp_path: Path) -> None:
    """Call 9 ran step 5 right after step 2: tiny-chat-think extends tiny-chat, and the file still
    said llama3_json. Its fingerprint proves which profile served; every bench request got HTTP 500."""
    profiles = tmp_path / "profiles"
    shutil.copytree(PROFILES, profiles)
    assert (
        build_plan(profiles, "tiny-chat-think").fingerprint()
        == _status(DATA / "reasoning" / "status-tiny-chat-think.json")["serving_fingerprint"]
    )
    toml = profiles / "tiny-chat.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace(
            'tool_call_parser = "hermes"', 'tool_call_parser = "llama3_json"'
        ),
        encoding="utf-8",
    )
    assert build_plan(profiles, "tiny-chat").fingerprint() == BAD
    inherited = _status(DATA / "reasoning-inherited" / "status-tiny-chat-think.json")
    assert build_plan(profiles, "tiny-chat-think").fingerprint() == inherited["serving_fingerprint"]
    bench = (DATA / "reasoning-inherited" / "bench-think.txt").read_text(encoding="utf-8")
    assert "[errors] 128/128 requests failed, e.g. HTTP 500: Llama3JsonToolParser could not locate" in bench


# --- step 3: bench on production; two traps set on purpose ---


def test_cold_was_proven_cold_on_the_real_prefix_cache() -> None:
    contexts = {c["context"]: c for c in _summary("bench/off")["contexts"]}
    for name, queries in (("short", 215), ("1k", 2099)):
        finding, proof = checks.cold_proof(MetricsDelta(prefix_queries=queries, prefix_hits=0), 2)
        assert finding is None and contexts[name]["proof"] == proof


def test_the_degenerate_detector_fires_again_on_the_recorded_answers() -> None:
    summary, cells = _summary("bench/off"), _cells("bench/off")
    assert len(cells) == len(summary["cells"]) == 14
    fired = []
    for cell in summary["cells"]:
        key = (cell["context"], cell["concurrency"])
        answers = [r for r in cells[key] if r["status"] == 200]
        scores, finding = rescore(answers)
        assert scored_as_recorded(answers, scores), key
        expected = [] if key == ("short", 64) else _flags(cell, Flag.DEGENERATE)
        assert ([finding.message] if finding else []) == expected, key
        if finding:
            fired.append(key)
    # recorded at c64 too: 12 of 48 scored answers, exactly a quarter; two more answers score now that
    # a Latin word stops at the CJK character it touches (`become秋天和冬天`), and 12 of 50 is under a quarter
    short64 = next(c for c in summary["cells"] if (c["context"], c["concurrency"]) == ("short", 64))
    assert _flags(short64, Flag.DEGENERATE) == [degenerate_message(12, 48, 0.19)]
    assert fired == [("1k", 16), ("1k", 32)] and summary["flag_counts"]["degenerate"] == 3


def test_empty_answers_recounted_from_the_records() -> None:
    summary, cells = _summary("bench/off"), _cells("bench/off")
    for cell in summary["cells"]:
        records = cells[(cell["context"], cell["concurrency"])]
        empty = [r["finish_reason"] for r in records if r["empty_answer"]]
        assert len(empty) == cell["empty_answers"]
        assert bool(checks.empty_answers(empty, len(records), reasoning=False)) == bool(
            _flags(cell, Flag.EMPTY_ANSWERS)
        )
    assert summary["flag_counts"]["empty-answers"] == 2


def test_one_prompt_at_temperature_0_is_one_sequence() -> None:
    [cell] = _summary("bench/same")["cells"]
    records = _cells("bench/same")[("short", 8)]
    assert {r["prompt"] for r in records} == {0} and len(records) == 8
    finding = checks.same_sequence(
        [(str(r["prompt"]), "greedy") for r in records], [r["content"] for r in records]
    )
    assert finding is not None and [finding.message] == _flags(cell, Flag.SAME_SEQUENCE)
    assert len({r["content"] for r in records}) == 1  # vLLM printed the very same text 8 times


def test_another_client_on_the_server_is_seen() -> None:
    summary, cells = _summary("bench/busy"), _cells("bench/busy")
    for cell in summary["cells"]:
        [message] = _flags(cell, Flag.OTHER_TRAFFIC)
        server, ours = (
            int(n) for n in re.findall(r"generated (\d+) tokens while we received (\d+)", message)[0]
        )
        assert ours == sum(r["output_tokens"] for r in cells[("short", cell["concurrency"])])
        finding = checks.other_traffic(MetricsDelta(generation_tokens=server), ours)
        assert finding is not None and finding.message == message
        assert checks.other_traffic(MetricsDelta(generation_tokens=ours), ours) is None  # alone: silent


# --- step 5: reasoning on, and the broken record ---


@pytest.mark.parametrize(
    ("folder", "max_tokens", "empty", "length"),
    [
        ("reasoning/think", 256, {1: 14, 8: 14, 64: 94}, {1: 0, 8: 0, 64: 0}),
        ("reasoning/think-small", 24, {1: 7, 8: 7}, {1: 5, 8: 5}),
    ],
)
def test_empty_answers_of_a_reasoning_model_say_why_they_ended(
    folder: str, max_tokens: int, empty: dict[int, int], length: dict[int, int]
) -> None:
    """At 256 tokens every empty answer ended with `stop` (the model closed its turn after
    thinking): the recorded message blamed max_tokens; the detector now tells them apart."""
    summary, cells = _summary(folder), _cells(folder)
    assert summary["options"]["max_tokens"] == max_tokens
    assert checks.small_max_tokens(True, max_tokens) is not None
    assert [f["flag"] for f in summary["flags"]].count(Flag.SMALL_MAX_TOKENS) == 1
    for cell in summary["cells"]:
        records = cells[("short", cell["concurrency"])]
        reasons = [r["finish_reason"] for r in records if r["empty_answer"]]
        assert (len(reasons), reasons.count("length")) == (
            empty[cell["concurrency"]],
            length[cell["concurrency"]],
        )
        finding = checks.empty_answers(reasons, len(records), reasoning=True)
        assert finding is not None and finding.message.startswith(
            f"{len(reasons)}/{len(records)} answers empty: "
        )
        stop = len(reasons) - reasons.count("length")
        assert (f"{stop} ended (stop) with no answer after reasoning" in finding.message) == (stop > 0)
        [recorded] = _flags(cell, Flag.EMPTY_ANSWERS)
        assert (
            recorded == f"{len(reasons)}/{len(records)} answers empty (the reasoning spent all of max_tokens)"
        )
        share = sum(r["reasoning_tokens"] for r in records) / sum(r["output_tokens"] for r in records)
        assert share == pytest.approx(cell["think_share"])


def test_the_broken_record_is_degenerate_and_its_cold_was_not_cold() -> None:
    summary, cells = _summary("reasoning/loop"), _cells("reasoning/loop")
    fired = 0
    for cell in summary["cells"]:
        _, finding = rescore(cells[("short", cell["concurrency"])])
        # at c64 two answers that touch Chinese (tests/recorded_bench.py `glued`) now score: 36 of 88
        recorded = _flags(cell, Flag.DEGENERATE)
        expected = [degenerate_message(36, 88, 0.10)] if cell["concurrency"] == 64 else recorded
        assert finding is not None and [finding.message] == expected
        fired += 1
    assert fired == 3
    # the template's shared system prompt is a cached prefix: 16 of 246 cold prompt tokens hit
    finding, proof = checks.cold_proof(MetricsDelta(prefix_queries=246, prefix_hits=16), 2)
    [context] = summary["contexts"]
    assert finding is not None and finding.flag == Flag.COLD_NOT_COLD and context["proof"] == proof


# --- step 4: the probe restored production; step 6: GuideLLM beside the bench ---


def test_the_probe_measured_both_arms_and_restored_production() -> None:
    probe = json.loads((DATA / "probe" / "probe.json").read_text(encoding="utf-8"))
    assert probe["error"] is None and probe["interrupted_by"] is None
    assert [(a["name"], a["outcome"], a["keys"]) for a in probe["arms"]] == [
        ("tiny-chat", "measured", []),
        ("seqs8", "measured", ["max_num_seqs=8"]),
        ("seqs32", "measured", ["max_num_seqs=32"]),
    ]
    assert probe["arms"][0]["fingerprint"] == probe["production"]["fingerprint"] == GOOD
    restore = probe["restore"]
    assert restore["ok"] and restore["phase"] == "serving" and restore["arm_leftovers"] == []


def test_the_side_by_side_table_is_reproduced_from_the_recorded_reports() -> None:
    folder = DATA / "guidellm"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "real-vllm" / "side_by_side.py"),
            "table",
            str(DATA / "bench" / "off" / "summary.json"),
            f"short={folder / 'short.json'}",
            f"1k={folder / '1k.json'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (folder / "side-by-side.md").read_text(encoding="utf-8")
    assert "104 distributions, 0 unmet" in (folder / "guidellm-deps.txt").read_text(encoding="utf-8")


def test_every_recorded_status_reads_back() -> None:
    found = sorted(p.name for p in DATA.rglob("status-*.json"))
    assert found == [
        "status-after.json",
        "status-tiny-chat-loop.json",
        "status-tiny-chat-think.json",
        "status-tiny-chat-think.json",
        "status-tiny-chat.json",
    ]
    for path in DATA.rglob("status-*.json"):
        assert _status(path)["phase"] in ("serving", "serving_last_good", "stopped")
