"""The pure parts of `launch check` (which gates, bounded how) and of `launch status` (the entry
a script reads, the exit code), in milliseconds; the real commands run in
tests/integration/test_check_status.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.check import CheckRequest, check_tables, parse_gate_names
from launcher.commands.status_cmd import PROBE_DETAIL, without_launcher
from launcher.errors import BadInput
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.state.serving import drift, exit_code, serving_entry
from tests.launcher_run import write_profile


def candidate(profiles_dir: Path, gates: dict[str, dict[str, Any]] | None = None) -> Candidate:
    write_profile(profiles_dir, "svc", 8123, gates=gates)
    return Candidate.from_plan(build_plan(profiles_dir, "svc"))


def test_gate_names_are_checked() -> None:
    assert parse_gate_names(" health, tool_call,health ") == ("health", "tool_call")
    with pytest.raises(BadInput, match="did you mean tool_call"):
        parse_gate_names("health,tool_cal")
    refused = {  # each refused with what it declares it needs beyond HTTP
        "kernel_marker": "it reads the start's log;",
        "graph_capture": "it reads the start's log;",
        "memory_leak": "it watches the engine.s processes and their memory and puts minutes of generated",
    }
    for name, why in refused.items():
        with pytest.raises(BadInput, match=why):
            parse_gate_names(name)


def test_probe_tables_are_bounded_and_run_one_tool_case(profiles_dir: Path) -> None:
    found = candidate(profiles_dir, {"tool_call": {"cases": ["required", "named"], "request_timeout_s": 120,
                                                   "required": False}})  # fmt: skip
    tables = check_tables(found, CheckRequest(timeout_s=7.0, wait_s=2.0))
    assert tables["tool_call"]["cases"] == ["required"]  # the profile's first case
    assert tables["tool_call"]["request_timeout_s"] == 7.0 and tables["tool_call"]["timeout_s"] == 2.0
    assert tables["tool_call"]["required"] is True  # a probe fails on any gate it runs
    assert tables["health"] == {
        "required": True,
        "timeout_s": 2.0,
        "request_timeout_s": 5.0,
    }  # the gate's own 5 s
    full = check_tables(found, CheckRequest(full=True))
    assert full["tool_call"]["cases"] == ["required", "named"]


def test_default_tool_case_when_the_profile_names_none(profiles_dir: Path) -> None:
    found = candidate(profiles_dir)
    bare = Candidate(**{**{f: getattr(found, f) for f in found.__slots__}, "gate_tables": {}})
    assert check_tables(bare, CheckRequest())["tool_call"]["cases"] == ["auto"]


STATUS = {"phase": "serving", "profile": "svc", "serving_fingerprint": "abc", "uptime_s": 4.2, "gates": []}
RECORD = {"fingerprint": "abc", "host": "0.0.0.0", "port": 8000, "expect": {"served_model_names": ["m"]}}


def test_entry_reads_url_and_model_from_the_record_that_serves() -> None:
    entry = serving_entry("svc", STATUS, RECORD, profile_known=True, profile_fingerprint="def")
    assert (entry["serving"], entry["url"], entry["served_model"]) == (True, "http://127.0.0.1:8000", "m")
    assert (entry["fingerprint"], entry["profile_fingerprint"]) == ("abc", "def")
    ipv6 = serving_entry("svc", STATUS, {**RECORD, "host": "fd00::7"}, profile_known=True)
    assert ipv6["url"] == "http://[fd00::7]:8000"
    stale = serving_entry("svc", STATUS, {**RECORD, "fingerprint": "old"}, profile_known=True)
    assert stale["url"] is None and stale["served_model"] is None  # never another launch's address
    broken = serving_entry("svc", STATUS, {**RECORD, "port": "8000", "expect": []}, profile_known=True)
    assert broken["url"] is None and broken["served_model"] is None


def test_exit_codes() -> None:
    serving = serving_entry("a", STATUS, RECORD, profile_known=True)
    last_good = serving_entry("b", {**STATUS, "phase": "serving_last_good"}, RECORD, profile_known=True)
    stopped = serving_entry("c", {**STATUS, "phase": "stopped"}, RECORD, profile_known=True)
    never = serving_entry("d", None, None, profile_known=True)
    unknown = serving_entry("e", None, None, profile_known=False)
    assert exit_code([serving]) == 0
    assert exit_code([serving, last_good]) == 6  # serving, but not what the file says: a rejected change
    assert exit_code([last_good, stopped]) == 3
    assert drift({**last_good, "profile_fingerprint": "abc"}) is None
    assert "`launch --profile svc --dry-run` shows the difference" in str(
        drift({**last_good, "profile_fingerprint": "new"})
    )
    assert drift({**stopped, "profile_fingerprint": "new"}) is None  # nothing serves: no drift to speak of
    assert exit_code([serving, stopped]) == 3 and exit_code([never]) == 3 and exit_code([]) == 3
    assert exit_code([unknown]) == 4
    assert stopped["url"] is None and never["phase"] == "never_run" and unknown["phase"] == "unknown"


def test_a_status_whose_launcher_is_gone_says_stopped_and_forgets_the_engine_pid() -> None:
    gating = {"phase": "gating", "launcher_pid": 41, "engine_pid": 42, "detail": "running gates"}
    without_launcher(gating)
    assert gating == {"phase": "stopped", "launcher_pid": 41, "engine_pid": None,
                      "detail": "launcher pid 41 is gone (last phase gating)"}  # fmt: skip
    failed = {"phase": "failed", "launcher_pid": 41, "engine_pid": None, "detail": "health: refused"}
    without_launcher(failed)
    assert failed == {"phase": "failed", "launcher_pid": 41, "engine_pid": None, "detail": "health: refused"}
    probing: dict[str, Any] = {
        "phase": "stopped", "launcher_pid": 43, "detail": f"{PROBE_DETAIL} 43: production comes back"
    }
    without_launcher(probing)
    assert probing["phase"] == "stopped"
    assert probing["detail"].startswith("launch probe pid 43 is gone and production did not come back")
    assert "`launch probe --recover` restores it" in probing["detail"]
