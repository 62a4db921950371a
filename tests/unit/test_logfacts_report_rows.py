"""The operator's report of a vLLM log (`launcher/logfacts/report.py`, `launch parse-log`), row by row,
on real logs: the real 0.26.0 runs (tests/data/real-vllm-0.26/) and the corpus of tests/data/logs/.
Each row says one decision: eager or captured, how many graphs of how many, a KV pool that differs per
rank, a start that failed and where, an engine that died after it was ready, a restart loop.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.logfacts import parse_file, parse_text
from launcher.logfacts.report import render_events, render_report

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "real-vllm-0.26"
CORPUS = DATA / "logs"


ROW = re.compile(r"^(?P<label>\S+(?: \S+)*) {2,}(?P<text>.*)$")


def rows(path: Path, markers: tuple[str, ...] = ()) -> dict[str, str]:
    """The report of a log file as {label: text}."""
    facts, _ = parse_file(str(path), markers=list(markers))
    return report_rows(render_report(facts))


def report_rows(report: str) -> dict[str, str]:
    """A report as {label: text}: labels are padded to one width, then two spaces."""
    found = {}
    for line in report.split("\n"):
        match = ROW.match(line)
        assert match, line
        found[match["label"]] = match["text"]
    return found


@pytest.mark.parametrize(
    ("log", "label", "text"),
    [
        (REAL / "tiny.log", "vLLM", "0.26.0 · model /root/tiny (served as tiny) · http://127.0.0.1:8011"),
        (REAL / "tiny.log", "KV pool", "28,947,616 tokens (27.61 GiB); 14134.58x requests of 2,048 tokens"),
        (REAL / "tiny.log", "CUDA graphs", "FULL_AND_PIECEWISE, 51 sizes (1…512): captured 102/102 in 1 s"),
        (REAL / "tiny.log", "load", "runner v2 · weights 0.0 GiB · compile 9.62 s · engine init 25.0 s"),
        (REAL / "tiny-ngram.log", "CUDA graphs", "FULL_AND_PIECEWISE, 4 sizes (1…8): captured 4/4 in 1 s"),
        (
            REAL / "tiny-ngram.log",
            "load",
            "runner v1 · weights 0.0 GiB · compile 9.48 s · engine init 21.82 s",
        ),
        (REAL / "eager" / "vllm.log", "CUDA graphs", "none: eager mode (--enforce-eager)"),
        (REAL / "eager" / "vllm.log", "load", "runner v2 · weights 0.0 GiB · engine init 18.91 s"),
        (REAL / "free-memory.log", "vLLM", "0.26.0 · model /root/tiny (served as tiny) · port 8011"),
        (REAL / "free-memory.log", "KV pool", "not in log"),
        (REAL / "free-memory.log", "CUDA graphs", "FULL_AND_PIECEWISE, 51 sizes (1…512): NOT captured"),
        (
            CORPUS / "fail_oom_capture.log",
            "CUDA graphs",
            "FULL_AND_PIECEWISE, 51 sizes (1…512): NOT captured (74/102 before it stopped); "
            "profiling pass 53 (not counted)",
        ),
        (
            CORPUS / "v011_dp0_tp4_per_rank_kv.log",
            "parallel",
            "TP 4 · max_model_len 65,536 · max_num_seqs 32 · gpu_memory_utilization 0.5",
        ),
        (
            CORPUS / "v011_dp0_tp4_per_rank_kv.log",
            "KV pool",
            "2,512,976 tokens (10.41 GiB); 38.34x requests of 65,536 tokens; "
            "per rank 2,513,305 / 2,513,440 / 2,512,976 / 2,513,305 (smallest shown)",
        ),
        (CORPUS / "two_line_kv_v011_glm.log", "parallel", "TP ? · max_model_len 65,536"),
        (CORPUS / "two_line_kv_v011_glm.log", "CUDA graphs", "mode not shown: captured 102/102 in 7 s"),
        (
            CORPUS / "capture_fallback_1_2.log",
            "CUDA graphs",
            "FULL_DECODE_ONLY, 2 sizes (1…2): captured 2/2 in 1 s; profiling pass 2 (not counted)",
        ),
    ],
)
def test_each_row_states_what_the_log_proves(log: Path, label: str, text: str) -> None:
    assert rows(log)[label] == text


def test_a_ready_start_says_how_long_it_took() -> None:
    assert rows(REAL / "tiny.log")["startup"] == "READY after 64 s"


def test_a_failed_start_names_its_kind_process_and_line() -> None:
    startup = rows(REAL / "free-memory.log")["startup"]
    assert startup.startswith("FAILED: free_memory (EngineCore) (line 42): (EngineCore pid=2018) ERROR ")
    assert startup.endswith("Decrease GPU memory utilization or reduce GPU memory used by other processes.")


def test_a_failure_during_capture_says_the_phase() -> None:
    assert rows(CORPUS / "fail_oom_capture.log")["startup"].startswith(
        "FAILED: oom (EngineCore, during capture) (line 30): "
    )


def test_an_engine_that_died_after_it_was_ready_is_said_with_its_line() -> None:
    """record/eager: the engine core was SIGKILLed while serving."""
    startup = rows(REAL / "eager" / "vllm.log")["startup"]
    assert startup.startswith("READY after 59 s; engine DIED later (line 131): (APIServer pid=689) WARNING ")
    assert startup.endswith("[shutdown] MPClient: engine core exited unexpectedly; starting cleanup")


def test_a_restart_loop_shows_every_startup_and_that_the_facts_are_the_last_ones() -> None:
    assert rows(CORPUS / "journal_restart_then_ready.log")["startups"] == (
        "2 in this log (failed:free_memory 1, ready 1); facts describe the last one. "
        "Last 2: line 1 failed:free_memory; line 29 ready"
    )
    assert "startups" not in rows(REAL / "tiny.log")


def test_facts_that_follow_from_other_lines_are_said_to_be_inferred() -> None:
    assert rows(CORPUS / "two_line_kv_v011_glm.log")["inferred"] == (
        "enforce_eager (from line 10), model_runner (from line 10): follow from other lines, stated by none"
    )
    assert "inferred" not in rows(REAL / "tiny.log")


def test_a_marker_is_seen_at_its_line_or_said_missing() -> None:
    assert rows(CORPUS / "capture_fallback_1_2.log", ("IQ4XS_BMMVQ_READY",))["marker"] == (
        "IQ4XS_BMMVQ_READY: seen at line 12"
    )
    assert rows(REAL / "tiny.log", ("IQ4XS_BMMVQ_READY",))["marker"] == "IQ4XS_BMMVQ_READY: NOT seen"


def test_a_log_cut_before_any_outcome_says_so() -> None:
    head = "\n".join((REAL / "tiny.log").read_text(encoding="utf-8").splitlines()[:20])
    facts, _ = parse_text(head)
    last = report_rows(render_report(facts))
    assert last["startup"] == "no outcome in log (still starting, or the log was cut)"
    assert last["CUDA graphs"] == "FULL_AND_PIECEWISE, 51 sizes (1…512): capture not finished in log"


def test_an_overlong_line_is_counted_in_a_note() -> None:
    text = (REAL / "tiny.log").read_text(encoding="utf-8") + "x" * (1024 * 1024 + 10) + "\n"
    facts, _ = parse_text(text)
    note = render_report(facts).split("\n")[-1]
    assert note == "note         1 line(s) longer than the parser reads were cut (10 characters not read)"


def test_events_are_listed_with_their_line_kind_and_details() -> None:
    _, events = parse_file(str(REAL / "tiny-ngram.log"))
    listed = render_events(events).split("\n")
    assert listed[0] == "      3  banner             version=0.26.0 startup=1"
    assert "     48  kv_cache_sized     proc=EngineCore tokens=28908720" in listed
    assert "     59  graphs_captured    secs=1.0 gib=0.04" in listed
    assert listed[-2:] == ["    103  ready              ", "    798  shutdown           "]
