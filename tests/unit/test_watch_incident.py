"""The evidence bundle the serving watch writes before it stops an engine (`launcher/watch/incident.py`):
what it says, how it folds a check seen every second into one line, how much of vLLM's log it keeps,
how many bundles it keeps, and that a directory it cannot write is an error for the caller to report.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from launcher.watch.incident import KEEP, LOG_LINES, TAIL_BYTES, stamp, write_incident
from launcher.watch.verdict import Check, Judgement, Kind, Observation, Verdict

T0 = 1764405000.0  # 2025-11-29T08:30:00Z
WEDGED = Judgement(
    Verdict.WEDGED,
    Check.CANARY,
    "2 canaries in a row got no answer within 10 s",
    process="VLLM::EngineCore pid 4360 is stopped (state T)",
)
REAL_LOG = Path(__file__).parents[1] / "data" / "real-vllm-0.26" / "tiny.log"


def bundle(directory: Path, **overrides: object) -> str:
    args: dict[str, object] = {
        "profile": "prod",
        "label": "last-good 3f2a9c1d",
        "judgement": WEDGED,
        "action": "restart",
        "pids": [],
        "prefixes": ("VLLM",),
        "observations": [],
        "engine_log": REAL_LOG,
        "now": 1_790_000_000.0,
    }
    args.update(overrides)
    return write_incident(directory, **args).read_text(encoding="utf-8")  # type: ignore[arg-type]


def section(text: str, title: str) -> list[str]:
    """The lines of one `== title...` section, up to the next blank line."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(f"== {title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] == ""), len(lines))
    return lines[start + 1 : end]


def test_the_bundle_leads_with_the_verdict_its_check_the_process_and_the_action(tmp_path: Path) -> None:
    text = bundle(tmp_path)
    head = text.split("\n")[:5]
    assert re.fullmatch(
        r"vllm-gate incident: wedged — profile prod — \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", head[0]
    )
    assert head[1:] == [
        "serving: last-good 3f2a9c1d",
        "verdict: wedged by canary: 2 canaries in a row got no answer within 10 s",
        "process: VLLM::EngineCore pid 4360 is stopped (state T)",
        "action: restart",
    ]


def test_a_verdict_without_a_bad_process_says_so(tmp_path: Path) -> None:
    failing = Judgement(Verdict.FAILING, Check.TOOL_CALL, "2 wrong tool calls in a row")
    text = bundle(tmp_path, judgement=failing, action="rollback")
    assert "process: no process seen in a bad state" in text.split("\n")
    assert next(tmp_path.glob("*.txt")).name.endswith("-failing.txt")


def failed(check: Check, kind: Kind, at: float, detail: str) -> tuple[float, Observation]:
    return at, Observation(check, kind, at - T0, detail)


def test_a_failure_seen_again_and_again_is_one_line_with_its_count_and_last_time(tmp_path: Path) -> None:
    stopped = "VLLM::EngineCore pid 4360 is stopped (state T)"
    observations = [
        (T0, Observation(Check.PROCESS, Kind.OK, 0.0, "3 processes running")),
        failed(Check.PROCESS, Kind.BAD_PROCESS, T0 + 1, stopped),
        failed(Check.PROCESS, Kind.BAD_PROCESS, T0 + 2, stopped),
        failed(Check.CANARY, Kind.TIMEOUT, T0 + 2.5, "canary: no answer within 10 s"),
        failed(Check.PROCESS, Kind.BAD_PROCESS, T0 + 3, stopped),
        failed(Check.PROCESS, Kind.BAD_PROCESS, T0 + 4, stopped),
        (T0 + 5, Observation(Check.HEALTH, Kind.OK, 5.0, "/health 200")),
    ]
    lines = section(bundle(tmp_path, observations=observations), "checks that failed")
    assert lines == [
        f"{stamp(T0 + 1)}  process     bad_process {stopped} (x2, until {stamp(T0 + 2)})",
        f"{stamp(T0 + 2.5)}  canary      timeout     canary: no answer within 10 s",
        f"{stamp(T0 + 3)}  process     bad_process {stopped} (x2, until {stamp(T0 + 4)})",
    ]


def test_times_are_utc_to_the_millisecond() -> None:
    assert stamp(T0 + 0.2567) == "2025-11-29T08:30:00.256Z"


def test_the_log_tail_is_its_last_lines(tmp_path: Path) -> None:
    tail = section(bundle(tmp_path), "the last")
    real = REAL_LOG.read_text(encoding="utf-8").splitlines()
    assert tail == real[-LOG_LINES:]


def test_a_log_past_the_tail_window_loses_only_its_cut_first_line(tmp_path: Path) -> None:
    """Only the log's last MiB is read: the line it starts in the middle of is left out, whole lines stay."""
    log = tmp_path / "engine.log"
    cut, whole = "a" * (TAIL_BYTES * 6 // 10), "b" * (TAIL_BYTES * 6 // 10)
    log.write_text(f"{cut}\n{whole}\n(APIServer pid=749) the last line\n", encoding="utf-8")
    assert section(bundle(tmp_path / "incidents", engine_log=log), "the last") == [
        whole,
        "(APIServer pid=749) the last line",
    ]


def test_a_long_log_gives_its_last_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("".join(f"line {n}\n" for n in range(LOG_LINES * 3)), encoding="utf-8")
    tail = section(bundle(tmp_path / "incidents", engine_log=log), "the last")
    assert tail == [f"line {n}" for n in range(LOG_LINES * 2, LOG_LINES * 3)]


def test_a_short_log_is_kept_whole_from_its_first_line(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("first\nsecond\n", encoding="utf-8")
    assert section(bundle(tmp_path / "incidents", engine_log=log), "the last") == ["first", "second"]


def test_a_missing_log_is_said_not_raised(tmp_path: Path) -> None:
    tail = section(bundle(tmp_path, engine_log=tmp_path / "gone.log"), "the last")
    assert tail == ["(not readable: No such file or directory)"]


def test_each_process_has_its_state_wchan_and_stack_lines(tmp_path: Path) -> None:
    pid = os.getpid()
    lines = section(bundle(tmp_path, pids=[pid]), "processes")
    assert re.fullmatch(rf".+ pid {pid}: state \w[\w-]*, wchan \S+", lines[0])
    assert len(lines) >= 2 and all(line.startswith("    ") for line in lines[1:])


def test_an_empty_group_is_said(tmp_path: Path) -> None:
    assert section(bundle(tmp_path), "processes") == ["(no process left in the engine's group)"]


def test_only_the_newest_bundles_are_kept_and_links_are_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / "incidents"
    directory.mkdir()
    for n in range(KEEP + 5):
        (directory / f"20250101T0000{n:02d}000000Z-wedged.txt").write_text("old\n", encoding="utf-8")
    kept_elsewhere = tmp_path / "operator-notes.txt"
    kept_elsewhere.write_text("mine\n", encoding="utf-8")
    (directory / "20240101T000000000000Z-link.txt").symlink_to(kept_elsewhere)
    bundle(directory)
    files = sorted(p.name for p in directory.glob("*.txt") if not p.is_symlink())
    assert len(files) == KEEP
    assert files[0] == "20250101T000006000000Z-wedged.txt"  # the six oldest went
    assert not files[-1].startswith("2025")  # the new one, stamped now
    assert kept_elsewhere.read_text(encoding="utf-8") == "mine\n"
    assert (directory / "20240101T000000000000Z-link.txt").is_symlink()


def test_a_directory_that_cannot_be_made_is_an_error_for_the_caller(tmp_path: Path) -> None:
    blocker = tmp_path / "incidents"
    blocker.write_text("a file where the directory should be\n", encoding="utf-8")
    with pytest.raises(OSError):
        bundle(blocker)
    assert blocker.read_text(encoding="utf-8") == "a file where the directory should be\n"
