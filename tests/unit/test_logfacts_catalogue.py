"""Every phrasing in the catalogue (launcher/data/log_catalogue.json, built from vLLM's source per
release) is read: each example is written as the first and the last release that print it would
print it, raised in the main process and in a worker, then decorated (compose prefix, ANSI, HTML
escapes, CRLF, an excerpt without the banner), and judged."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from launcher.logfacts import catalogue, parse_text, phrasings
from tests.unit import catalogue_lines as cl

VLLM_026 = Path(os.environ.get("VLLM_SRC_026", "/work/vllm-src-0.26/vllm"))  # vLLM 0.26.0, unpacked
CATALOGUE = json.loads(
    (Path(__file__).resolve().parents[2] / "launcher" / "data" / "log_catalogue.json").read_text()
)
ROWS: list[dict[str, Any]] = CATALOGUE["rows"]
OUTSIDE_VLLM = ("0.6.4", "0.8.5", "0.11.0", "0.26.0", "0.33.0")  # releases to try torch/HF/CUDA text on


def _releases(row: dict[str, Any]) -> list[str]:
    if not row["first_release"]:
        return list(OUTSIDE_VLLM)
    return sorted({row["first_release"], row["last_release"]}, key=cl.release_key)


def _failure_cases() -> list[Any]:
    cases = []
    for i, row in enumerate(ROWS):
        if "kind" not in row:
            continue
        for release in _releases(row):
            for shape in _shapes(row):
                cases.append(pytest.param(row, release, shape, id=f"{i}-{row['kind']}-{release}-{shape}"))
    return cases


def _shapes(row: dict[str, Any]) -> list[str]:
    """How the message reaches the log: argparse, pydantic, a logged line, or a raised exception in the
    main process and in a worker (the generic engine_init line only comes from the main process)."""
    for shape in ("argparse", "pydantic", "logged"):
        if row.get(shape):
            return [shape]
    return ["main"] if row["kind"] == "engine_init" else ["main", "worker"]


def _render(row: dict[str, Any], release: str, shape: str) -> tuple[list[str], str, str | None]:
    """Lines, the failure message the parser must report, and the process that printed it."""
    example = row["example"]
    first = example.split("\n")[0]
    if shape == "argparse":
        return cl.argparse_error(release, example), f"vllm: error: {first}", None
    if shape == "pydantic":
        lines = cl.pydantic_error(release, example)
        return lines, lines[-1].strip(), None
    if shape == "logged":
        proc = "EngineCore_DP0" if cl.release_key(release) >= (0, 11, 0) else None
        return cl.logged_error(release, example), first, proc
    exc = row["exception"]  # the two remaining shapes raise it: a row that can be raised names its class
    if shape == "main":
        return cl.raised_unprefixed(release, exc, example), f"{exc}: {first}", None
    return cl.raised_in_worker(release, exc, example), f"{exc}: {first}", cl.worker_proc(release)


def test_catalogue_covers_every_failure_kind_of_the_issue() -> None:
    kinds = {row["kind"] for row in ROWS if "kind" in row}
    assert kinds >= {"free_memory", "kv_cache_too_small", "oom", "tool_parser", "reasoning_parser",
                     "engine_init", "distributed", "model_not_found", "port_in_use", "gpu_capability",
                     "config", "chat_template", "argument", "compile", "cuda_graph"}
    for row in ROWS:
        assert row["releases"], row["phrase"]
        if row["origin"] == "vllm":
            assert row["site_first"] and row["site_last"], f"no source line for {row['phrase']!r}"


NEWLINES = {"lf": "\n", "crlf": "\r\n"}


@pytest.mark.parametrize(("row", "release", "shape"), _failure_cases())
def test_each_phrasing_is_judged(row: dict[str, Any], release: str, shape: str) -> None:
    """Every decoration on both line ends; one item per phrasing keeps the suite's item count (and
    its per-item cost on every worker) in proportion, and a failure still names each form it broke."""
    lines, message, proc = _render(row, release, shape)
    want = ("failed", row["kind"], message, proc)
    wrong = {}
    for decoration in sorted(cl.DECORATIONS):
        for ending, newline in NEWLINES.items():
            text = newline.join(cl.DECORATIONS[decoration](lines)) + newline
            facts, _ = parse_text(text)
            got = (facts.outcome, facts.failure_kind, facts.failure_message, facts.failure_proc)
            if got != want:
                wrong[f"{decoration}-{ending}"] = (got, text)
    assert wrong == {}, f"want {want}"


@pytest.mark.parametrize("row", [r for r in ROWS if "fact" in r], ids=lambda r: r["phrase"][:40])
def test_each_fact_phrasing_is_read(row: dict[str, Any]) -> None:
    for release in _releases(row):
        version = release
        msg = row["example"].replace("{version}", version)
        kv = cl.record(release, "INFO", "kv_cache_utils.py:1", "# GPU blocks: 100")
        lines = [kv] if row.get("after_kv") else []
        lines.append(cl.record(release, "INFO", "core.py:58", msg))
        facts = parse_text("\n".join(lines) + "\n")[0].to_json()
        want = {k: (v.replace("{version}", version) if isinstance(v, str) else v)
                for k, v in row["fact"].items()}
        assert {k: facts[k] for k in want} == want, (release, msg)


def test_engine_init_names_the_root_cause_printed_before_it() -> None:
    """`Engine core initialization failed. See root cause above.`: the cause line is the first
    uncaught exception of the startup, the kind stays engine_init (no rule knows the exception)."""
    lines = cl.raised_in_worker("0.26.0", "ValueError", "Unsupported head size: 72")
    facts, _ = parse_text("\n".join(lines) + "\n")
    assert facts.failure_kind == "engine_init"
    assert facts.failure_message == "ValueError: Unsupported head size: 72"
    assert facts.failure_proc == "Worker_TP1"


def test_oom_reports_the_phase_and_the_rank() -> None:
    start = [
        cl.record("0.9.2", "INFO", "core.py:58", "Initializing a V1 LLM engine (v0.9.2) with config: "
                  "model='m', tensor_parallel_size=4, enforce_eager=False"),
        cl.record("0.9.2", "INFO", "gpu_model_runner.py:1", "Model loading took 15.27 GiB and 14.8 seconds",
                  "VllmWorker rank=3"),
        cl.record("0.9.2", "INFO", "kv_cache_utils.py:1", "GPU KV cache size: 412,160 tokens"),
        "(VllmWorker rank=3 pid=4414) Capturing CUDA graphs:  40%|████      | 27/67 [00:03<00:04]",
    ]
    oom = cl.raised_in_worker("0.9.2", "torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate "
                              "20.00 MiB. GPU 3 has a total capacity of 79.19 GiB")[1:]
    text = "\n".join(start + [line.replace("rank=1", "rank=3") for line in oom]) + "\n"
    facts, _ = parse_text(text)
    got = (facts.failure_kind, facts.failure_phase, facts.failure_proc)
    assert got == ("oom", "capture", "VllmWorker rank=3")


def test_docs_show_the_catalogue_as_built() -> None:
    """docs/logs.md carries the table the catalogue module renders from the JSON (rebuild both together)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "logs.md").read_text(encoding="utf-8")
    assert f"{catalogue.BEGIN}\n{catalogue.render_table(CATALOGUE)}\n{catalogue.END}" in docs
    assert catalogue.load() == CATALOGUE


def test_the_json_is_built_from_every_phrasing() -> None:
    """A phrasing added to phrasings.py without a rebuild (or a row edited by hand) fails here."""
    entries = phrasings.FAILURES + phrasings.FACTS
    assert len(ROWS) == len(entries)
    for row, entry in zip(ROWS, entries, strict=True):
        assert {k: row[k] for k in entry} == entry


def test_a_rebuild_from_the_source_at_hand_changes_nothing(tmp_path: Path) -> None:
    """vLLM 0.26.0's source, where this machine has it: rebuilding from it alone gives the same JSON
    (each row's 0.26.0 membership and file:line are what that source says)."""
    if not VLLM_026.is_dir():
        pytest.skip(f"no vLLM source at {VLLM_026}")
    (tmp_path / "0.26.0").symlink_to(VLLM_026.parent)
    assert catalogue.build(catalogue.scan(tmp_path), CATALOGUE) == CATALOGUE


def test_ranges_and_expand_are_inverse() -> None:
    releases = ["0.6.0", "0.6.2", "0.7.0", "0.8.0", "0.9.0"]
    hits = {"0.6.0", "0.6.2", "0.8.0", "0.9.0"}
    assert catalogue.ranges(hits, releases) == ["0.6.0-0.6.2", "0.8.0-0.9.0"]
    assert catalogue.expand(catalogue.ranges(hits, releases), releases) == hits


def test_a_release_not_scanned_keeps_what_the_previous_build_found() -> None:
    previous = catalogue.build({"0.6.0": {"Using max model len %s": "vllm/config.py:1"}}, None)
    both = catalogue.build({"0.7.0": {"Using max model len %s": "vllm/config.py:9"}}, previous)
    row = next(r for r in both["rows"] if r["phrase"] == "Using max model len %s")
    assert row["releases"] == ["0.6.0-0.7.0"] and row["site_first"] == "vllm/config.py:1"
    assert row["site_last"] == "vllm/config.py:9" and both["releases_scanned"] == ["0.6.0", "0.7.0"]
