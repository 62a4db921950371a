"""What `launch status` makes of a status record (`launcher/commands/status_cmd.py`'s helpers): the URL
and model of what serves from its recorded argv, a launcher that is gone, the watch's line, and the
lines the operator reads. Status records are files in a temporary state dir; nothing is started.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from launcher.commands.status_cmd import _endpoint, _human, _status, _watch_line
from launcher.state.store import StateStore


def pid_max() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text(encoding="utf-8"))


GONE = pid_max() + 1  # above the kernel's pid range: no process can have it


@pytest.mark.parametrize(
    ("argv", "endpoint"),
    [
        (
            ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8100"],
            {"url": "http://127.0.0.1:8100", "model": "Qwen/Qwen3-8B"},
        ),  # fmt: skip
        (
            ["vllm", "serve", "/models/q", "--host", "0.0.0.0", "--served-model-name", "qwen3-8b"],
            {"url": "http://127.0.0.1:8000", "model": "qwen3-8b"},
        ),  # fmt: skip
        (
            ["vllm", "serve", "m", "--host", "10.0.0.5", "--port", "8200"],
            {"url": "http://10.0.0.5:8200", "model": "m"},
        ),
        (["vllm", "serve", "m", "--host", "::"], {"url": "http://127.0.0.1:8000", "model": "m"}),
        (
            ["vllm", "serve", "m", "--host", "::1", "--port", "8100"],
            {"url": "http://[::1]:8100", "model": "m"},
        ),
        (
            ["python3", "-m", "vllm_sim", "--port", "9000"],
            {"url": "http://127.0.0.1:9000"},
        ),  # no `serve`: no model
        (
            ["vllm", "serve", "m", "--port"],
            {"url": "http://127.0.0.1:8000", "model": "m"},
        ),  # a flag without value
        ("vllm serve m", {}),
        (["vllm", "serve", 7], {}),
        (None, {}),
    ],
)
def test_the_endpoint_is_read_from_the_recorded_argv_with_vllms_defaults(
    argv: Any, endpoint: dict[str, str]
) -> None:
    """vLLM listens on 0.0.0.0:8000 unless told; a wildcard host is reached on loopback."""
    assert _endpoint(argv) == endpoint


@pytest.mark.parametrize(
    ("watch", "line"),
    [
        ({"verdict": "serving"}, "serving"),
        ({"verdict": "degraded", "check": "health"}, "degraded by health"),
        (
            {
                "verdict": "wedged",
                "check": "canary",
                "since": "2025-11-29T08:30:00Z",
                "detail": "no answer within 10 s (2 in a row)",
                "process": "VLLM::EngineCore pid 4360 is stopped (state T)",
            },
            "wedged by canary since 2025-11-29T08:30:00Z: no answer within 10 s (2 in a row); "
            "VLLM::EngineCore pid 4360 is stopped (state T)",
        ),  # fmt: skip
        (
            {
                "verdict": "wedged",
                "check": "process",
                "detail": "VLLM::EngineCore pid 4360 is stopped (state T)",
                "process": "VLLM::EngineCore pid 4360 is stopped (state T)",
            },
            "wedged by process: VLLM::EngineCore pid 4360 is stopped (state T)",
        ),  # fmt: skip
        ({"verdict": "serving", "detail": "all checks pass"}, "serving"),  # a detail only with its check
    ],
)
def test_the_watch_line_names_verdict_check_time_detail_and_a_process_not_already_named(
    watch: dict[str, Any], line: str
) -> None:
    assert _watch_line(watch) == line


def test_the_human_form_lists_what_is_known_in_a_fixed_order() -> None:
    entry = {
        "profile": "prod",
        "phase": "serving_last_good",
        "detail": "rolled back: tool_call failed",
        "engine_pid": 4242,
        "url": "http://127.0.0.1:8100",
        "model": "qwen3-8b",
        "rollback_reason": "gate tool_call: the named case called no tool",
        "serving_fingerprint": "3f2a9c1d",
        "engine_log": "/var/lib/vllm-gate/profiles/prod/logs/engine.log",
        "uptime_s": None,
        "watch": {"verdict": "degraded", "check": "health"},
        "gates": [{"name": "health", "verdict": "pass", "summary": "/health 200"}],
    }
    assert _human(entry).split("\n") == [
        "prod: serving_last_good",
        "  url: http://127.0.0.1:8100",
        "  model: qwen3-8b",
        "  serving launch: 3f2a9c1d",
        "  vLLM pid: 4242",
        "  last rollback because: gate tool_call: the named case called no tool",
        "  detail: rolled back: tool_call failed",
        "  vLLM log: /var/lib/vllm-gate/profiles/prod/logs/engine.log",
        "  watch: degraded by health",
        "  gate health: pass — /health 200",
    ]


@pytest.mark.parametrize(
    ("phase", "verdict", "headline"),
    [
        ("serving", "wedged", "prod: serving, but the serving watch says wedged: not serving"),
        (
            "serving_last_good",
            "failing",
            "prod: serving_last_good, but the serving watch says failing: not serving",
        ),
        ("serving", "degraded", "prod: serving"),  # still serves: exit 0
        ("serving", "starving", "prod: serving"),
        ("stopped", "wedged", "prod: stopped"),
    ],
)
def test_the_first_line_never_says_serving_alone_beside_exit_3(
    phase: str, verdict: str, headline: str
) -> None:
    """Was: `prod: serving` over exit 3, when the watch had judged the server wedged."""
    entry = {"profile": "prod", "phase": phase, "watch": {"verdict": verdict, "check": "canary"}}
    assert _human(entry).split("\n")[0] == headline


def test_the_watch_is_shown_only_while_something_serves() -> None:
    entry = {"profile": "prod", "phase": "stopped", "watch": {"verdict": "wedged", "check": "canary"}}
    assert _human(entry) == "prod: stopped"


def test_a_profile_file_that_renders_another_launch_is_said_with_the_command_to_see_why() -> None:
    entry = {"profile": "prod", "phase": "serving", "serving": True, "fingerprint": "aaaa1111",
             "profile_fingerprint": "bbbb2222"}  # fmt: skip
    assert _human(entry).split("\n")[-1] == (
        "  file: the profile file renders bbbb2222, but aaaa1111 serves: "
        "`launch --profile prod --dry-run` shows the difference"
    )


def with_status(tmp_path: Path, record: dict[str, Any], name: str = "prod") -> StateStore:
    store = StateStore(tmp_path / "state")
    path = store.status_path(name)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return store


def test_a_gone_launcher_means_stopped_and_its_engine_pid_is_forgotten(tmp_path: Path) -> None:
    store = with_status(tmp_path, {"phase": "serving", "launcher_pid": GONE, "engine_pid": 4242,
                                   "engine_started_at": "2025-11-29T08:30:00.000000Z"})  # fmt: skip
    status = _status(store, "prod")
    assert status is not None
    assert (status["phase"], status["engine_pid"], status["uptime_s"], status["launcher_alive"]) == (
        "stopped",
        None,
        None,
        False,
    )
    assert status["detail"] == f"launcher pid {GONE} is gone (last phase serving)"
    assert status["profile"] == "prod" and status["engine_log"] == str(store.engine_log("prod"))


def test_a_gone_launcher_that_had_stopped_keeps_its_phase_and_detail(tmp_path: Path) -> None:
    store = with_status(tmp_path, {"phase": "failed", "launcher_pid": GONE, "detail": "gate health failed"})
    status = _status(store, "prod")
    assert status is not None and (status["phase"], status["detail"]) == ("failed", "gate health failed")


def test_a_killed_probe_says_how_production_comes_back(tmp_path: Path) -> None:
    detail = "launch probe pid 77 runs arms; production comes back when it ends"  # probe/session.py
    store = with_status(tmp_path, {"phase": "stopped", "launcher_pid": GONE, "detail": detail})
    status = _status(store, "prod")
    assert status is not None
    assert status["detail"] == (
        f"launch probe pid {GONE} is gone and production did not come back: "
        "`launch probe --recover` restores it (so does the profile's next start)"
    )


def test_a_live_launcher_keeps_its_phase_and_engine(tmp_path: Path) -> None:
    store = with_status(tmp_path, {"phase": "gating", "launcher_pid": os.getpid(), "engine_pid": 4242})
    status = _status(store, "prod")
    assert status is not None
    assert (status["phase"], status["engine_pid"], status["launcher_alive"]) == ("gating", 4242, True)
    assert status["uptime_s"] is None  # no start time recorded


def test_a_live_launcher_with_an_unreadable_start_time_has_no_uptime(tmp_path: Path) -> None:
    store = with_status(tmp_path, {"phase": "gating", "launcher_pid": os.getpid(), "engine_pid": 4242,
                                   "engine_started_at": "yesterday"})  # fmt: skip
    status = _status(store, "prod")
    assert status is not None and status["uptime_s"] is None


def test_no_status_file_is_no_status(tmp_path: Path) -> None:
    assert _status(StateStore(tmp_path / "state"), "prod") is None


def test_a_candidate_on_trial_beside_what_serves_is_named_with_its_port_and_pid() -> None:
    entry = {
        "profile": "prod",
        "phase": "serving",
        "engine_pid": 4242,
        "trial": {"label": "candidate prod@9a1b", "port": 8001, "engine_pid": 5151},
    }
    lines = _human(entry).split("\n")
    assert "  vLLM pid: 4242" in lines  # what serves keeps the status's engine
    assert lines[-1] == "  trial: candidate prod@9a1b beside what serves (port 8001, engine pid 5151)"
    assert not any("trial" in line for line in _human({**entry, "trial": None}).split("\n"))
