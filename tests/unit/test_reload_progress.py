"""`launch set --apply` / `launch rollback` wait up to 30 minutes: each new phase and gate is a line."""

from __future__ import annotations

import pytest

from launcher.commands.live_reload import ReloadProgress


def gate(name: str, verdict: str) -> dict[str, str]:
    return {"name": name, "verdict": verdict, "summary": f"{name} said {verdict}"}


def test_each_new_phase_and_gate_is_one_line_and_the_old_start_is_not_repeated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = {"phase": "serving", "gates": [gate("health", "pass")]}
    progress = ReloadProgress(before)
    for status in (
        before,  # nothing new yet
        {"phase": "starting", "gates": [gate("health", "pass")]},  # the previous start's gates
        {"phase": "gating", "gates": []},
        {"phase": "gating", "gates": [gate("health", "pass")]},
        {"phase": "gating", "gates": [gate("health", "pass")]},  # read again: nothing new
        {"phase": "gating", "gates": [gate("health", "pass"), gate("smoke", "fail")]},
        {"phase": "serving_last_good", "gates": [gate("health", "pass"), gate("smoke", "fail")]},
    ):
        progress(status)
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "phase starting",
        "phase gating",
        "gate health: pass — health said pass",
        "gate smoke: fail — smoke said fail",
        "phase serving_last_good",
    ]


def test_the_launchers_own_lines_replace_what_the_status_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """A launcher that writes this request's progress lines is shown as `launch try` shows it; the
    status polling (for an older launcher) then stays quiet."""
    progress = ReloadProgress({"phase": "serving", "gates": []})
    record = {"event": "gate.pass", "msg": "gate 2/4 graph_capture: pass", "phase": "gating", "elapsed_s": 3,
              "summary": "graphs 3/3", "gate": "graph_capture", "index": 2, "total": 4}  # fmt: skip
    progress.line(record)
    progress({"phase": "serving", "gates": [gate("health", "pass")]})
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines == ["gating: gate 2/4 graph_capture: pass summary=graphs 3/3"]
