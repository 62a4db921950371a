"""`launch logs` as the operator runs it: vLLM's log and the history interleaved, apart, followed."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH

pytestmark = pytest.mark.integration

REAL = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "free-memory.log"


def utc_of_local(text: str) -> str:
    when = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").astimezone().astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    logs = tmp_path / "state" / "profiles" / "prod" / "logs"
    logs.mkdir(parents=True)
    (logs / "engine.log").write_bytes(REAL.read_bytes())  # vLLM 0.26.0's own failed start
    year = datetime.now().year
    records = [
        {
            "ts": utc_of_local(f"{year}-11-29 09:37:24"),
            "event": "start",
            "profile": "prod",
            "label": "prod@ab",
        },
        {"ts": utc_of_local(f"{year}-11-29 09:37:24"), "event": "start", "profile": "other"},
        {
            "ts": utc_of_local(f"{year}-11-29 09:37:40"),
            "event": "rejected",
            "profile": "prod",
            "reason": "died",
        },
    ]
    (tmp_path / "state" / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path / "state"


def launch_logs(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--state-dir", str(state), "logs", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_both_sources_interleave_by_time_and_each_line_says_which(state: Path) -> None:
    done = launch_logs(state, "prod")
    assert done.returncode == 0, done.stderr
    assert f"# vLLM log: {state / 'profiles' / 'prod' / 'logs' / 'engine.log'}" in done.stderr
    lines = done.stdout.splitlines()
    real = REAL.read_text(encoding="utf-8").splitlines()
    assert [x[len("engine| ") :] for x in lines if x.startswith("engine| ")] == real
    launch = [i for i, x in enumerate(lines) if x.startswith("launch| ")]
    assert len(launch) == 2 and "start" in lines[launch[0]] and 'reason="died"' in lines[launch[1]]
    first_at_24 = next(i for i, x in enumerate(lines) if "INFO 11-29 09:37:24" in x)
    first_at_25 = next(i for i, x in enumerate(lines) if "11-29 09:37:25" in x)
    assert first_at_24 < launch[0] < first_at_25  # the start sits among vLLM's lines of its second
    assert launch[1] == len(lines) - 1  # the verdict after vLLM's last line


def test_engine_alone_is_the_file_as_vllm_wrote_it_and_launcher_alone_the_history(state: Path) -> None:
    engine = launch_logs(state, "prod", "--engine")
    assert engine.returncode == 0 and engine.stdout == REAL.read_text(encoding="utf-8")
    history = launch_logs(state, "prod", "--launcher").stdout.splitlines()
    assert len(history) == 2  # the other profile's record is not shown
    assert ' start label="prod@ab"' in history[0] and ' rejected reason="died"' in history[1]


def test_status_names_the_engine_log(state: Path) -> None:
    status = {"phase": "failed", "profile": "prod", "launcher_pid": 0}
    (state / "profiles" / "prod" / "status.json").write_text(json.dumps(status))
    log = state / "profiles" / "prod" / "logs" / "engine.log"
    argv = [str(LAUNCH), "--state-dir", str(state), "status", "--profile", "prod"]
    assert f"  vLLM log: {log}" in subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    shown = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60).stdout
    assert json.loads(shown)["profiles"][0]["engine_log"] == str(log)


def test_json_is_one_object_a_line_with_the_same_keys_and_the_history_record(state: Path) -> None:
    """`--json` (issue 44): JSON Lines, so a reader (`jq`, a log shipper) needs no text parsing; the
    launcher's lines carry their history record as stored."""
    done = launch_logs(state, "prod", "--json")
    assert done.returncode == 0, done.stderr
    shown = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(set(line) == {"at", "source", "text", "record"} for line in shown)
    engine = [line for line in shown if line["source"] == "engine"]
    assert [line["text"] for line in engine] == REAL.read_text(encoding="utf-8").splitlines()
    assert all(line["record"] is None for line in engine)
    launch = [line for line in shown if line["source"] == "launch"]
    assert [line["record"]["event"] for line in launch] == ["start", "rejected"]
    assert launch[1]["at"] == launch[1]["record"]["ts"] and launch[1]["record"]["reason"] == "died"
    stamped = next(line for line in engine if "09:37:25" in line["text"])
    assert stamped["at"] == utc_of_local(f"{datetime.now().year}-11-29 09:37:25")


def test_since_cuts_and_bad_input_is_one_paragraph(state: Path) -> None:
    assert launch_logs(state, "prod", "--since", "1m").stdout == ""  # all of it is older
    for args, words in (
        (["prod", "--since", "soon"], "--since 'soon'"),
        (["nope"], "nothing has run for profile 'nope'"),
        (["../etc"], "invalid profile name"),
    ):
        done = launch_logs(state, *args)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_follow_prints_new_lines_and_survives_rotation(state: Path) -> None:
    log = state / "profiles" / "prod" / "logs" / "engine.log"
    argv = [str(LAUNCH), "--state-dir", str(state), "logs", "prod", "--engine", "-f"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen: queue.Queue[str] = queue.Queue()

    def read_lines() -> None:
        for line in proc.stdout or []:
            seen.put(line.rstrip("\n"))

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()

    def wait_for(text: str) -> None:
        while True:
            line = seen.get(timeout=20)  # a deadline, not a sleep: queue.Empty fails the test
            if line == text:
                return

    try:
        wait_for(REAL.read_text(encoding="utf-8").splitlines()[-1])
        new = "(APIServer pid=1947) INFO 11-29 09:38:00 [launcher.py:1] written after the start of -f"
        with log.open("a") as out:
            out.write(new + "\n")
        wait_for(new)
        os.rename(log, log.with_name("engine.log.1"))
        log.write_text("after rotation\n")
        wait_for("after rotation")
    finally:
        proc.terminate()  # the process this test started, by its own handle
        proc.wait(timeout=10)


def test_status_shows_url_and_model_of_what_serves_and_no_stale_pid(state: Path) -> None:
    profile_dir = state / "profiles" / "prod"
    argv = ["vllm", "serve", "/models/fable", "--port", "8011", "--served-model-name", "fable-9b", "tiny"]
    expect = {"served_model_names": ["fable-9b"]}
    record = {"profile": "prod", "fingerprint": "ab12", "argv": argv, "env": {}, "host": "127.0.0.1",
              "port": 8011, "gate_order": ["health"], "expect": expect}  # fmt: skip
    (profile_dir / "last_good.json").write_text(json.dumps(record))
    me = os.getpid()  # alive: this test process stands in for a running launcher
    (profile_dir / "status.json").write_text(
        json.dumps({"phase": "serving", "profile": "prod", "launcher_pid": me, "engine_pid": 4242})
    )
    cmd = [str(LAUNCH), "--state-dir", str(state), "status", "--profile", "prod"]
    shown = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    assert "  url: http://127.0.0.1:8011\n  model: fable-9b\n" in shown and "  vLLM pid: 4242" in shown
    assert "serving_fingerprint" not in shown and "engine_pid" not in shown  # no raw key names
    gone = {"phase": "serving", "profile": "prod", "launcher_pid": 0, "engine_pid": 4242}
    (profile_dir / "status.json").write_text(json.dumps(gone))  # the launcher died, the pid is stale
    shown = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    assert "prod: stopped" in shown and "4242" not in shown and "url:" not in shown
