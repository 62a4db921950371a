"""Preflight's checks that need no GPU (launcher/host/host_checks.py) and the process facts they read
(process_view.py): the port on real sockets (free, held by us, held by the engine a reload stops
first, held by a `vllm serve` nobody's launcher started), the swap and restart-guard verdicts, and
how a process is recognised and labelled."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.host.host_checks import (
    check_host_memory,
    check_model_path,
    check_port,
    check_restart_guard,
    check_swap,
)
from launcher.host.process_view import ProcessView, is_api_server, my_lineage, view_of, vllm_title
from launcher.host.report import CheckStatus
from launcher.host.restart_guard import GuardStatus
from tests.simserver import HANG_S

GIB = 1 << 30
# Listens on a port it is given, says so, and waits; its argv says `vllm serve` (a server started by hand).
LISTENER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(3600)
"""


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def test_a_free_port_is_free(listening: socket.socket) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = check_port("127.0.0.1", port)
    assert (result.status, result.detail) == (CheckStatus.OK, f"port: 127.0.0.1:{port} is free")


def test_a_port_in_use_names_its_listener(listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    result = check_port("127.0.0.1", port)
    me = view_of(os.getpid())
    assert me is not None
    assert result.status is CheckStatus.REFUSED
    assert result.detail == f"port: 127.0.0.1:{port} is in use by pid {os.getpid()} {me.label}"
    assert result.hint == "stop what listens there, or give the profile another engine.port"


def test_a_poll_asks_only_whether_the_port_binds(listening: socket.socket) -> None:
    """A release wait polls every 0.1 s: naming the holder walks every process's sockets, so a poll
    learns only that the port is in use, and the holder is named when the wait speaks."""
    port = listening.getsockname()[1]
    result = check_port("127.0.0.1", port, name_holders=False)
    assert (result.status, result.detail) == (CheckStatus.REFUSED, f"port: 127.0.0.1:{port} is in use")


def test_the_port_of_the_engine_a_reload_stops_first_counts_as_free(listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    result = check_port("127.0.0.1", port, serving=frozenset({os.getpid()}))
    assert result.status is CheckStatus.OK and "held by the serving engine, stopped first" in result.detail
    other = check_port("127.0.0.1", port, serving=frozenset({os.getpid() + 1}))
    assert other.status is CheckStatus.REFUSED, "another engine's port is not ours to free"


def test_a_vllm_started_by_hand_is_named_with_how_to_stop_it(tmp_path: Path) -> None:
    program = tmp_path / "vllm"  # its command line reads `python3 .../vllm serve org/model`
    program.write_text(f"#!{sys.executable}\n{LISTENER}")
    program.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "VLLM_GATE_DEPLOYMENT"}
    proc = subprocess.Popen([str(program), "serve", "org/model"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        result = check_port("127.0.0.1", port)
        assert result.status is CheckStatus.REFUSED and f"by pid {proc.pid} python" in result.detail
        assert result.hint is not None
        assert result.hint.startswith(
            f"pid {proc.pid} is a vLLM server no launcher started (no deployment mark)"
        )
        assert f"`kill {proc.pid}`" in result.hint
    finally:
        proc.kill()
        proc.wait(HANG_S)
        if proc.stdout is not None:
            proc.stdout.close()


def test_an_address_that_is_not_ours_or_not_a_host_is_refused_with_the_reason() -> None:
    foreign = check_port("192.0.2.1", 8000)  # TEST-NET-1: no interface here has it
    assert foreign.status is CheckStatus.REFUSED and foreign.detail.startswith(
        "port: cannot bind 192.0.2.1:8000"
    )
    assert foreign.hint == "fix engine.host/engine.port"
    unknown = check_port("no-such-host.invalid", 8000)
    assert (
        unknown.status is CheckStatus.REFUSED
        and "cannot resolve host 'no-such-host.invalid'" in unknown.detail
    )


def test_swap_is_only_judged_when_a_limit_is_set() -> None:
    unset = check_swap(3 * GIB, None)
    assert unset.status is CheckStatus.SKIPPED and unset.detail.endswith("(swap used 3.00 GiB)")
    assert check_swap(4 * GIB, 4.0).status is CheckStatus.OK, "at the limit is within it"
    assert check_swap(4 * GIB + 1, 4.0).data == {"used_gib": 4.0}


def test_a_model_path_that_is_a_file_or_a_link_to_one_is_readable(tmp_path: Path) -> None:
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF")
    (tmp_path / "link.gguf").symlink_to(weights)
    assert check_model_path(str(weights)).status is CheckStatus.OK
    assert check_model_path(str(tmp_path / "link.gguf")).status is CheckStatus.OK
    assert check_model_path("./no/such/dir").detail == "model path ./no/such/dir does not exist"
    assert check_model_path(None).detail == "no engine.model"


def test_the_restart_guard_refuses_a_candidate_that_keeps_failing() -> None:
    fine = check_restart_guard(GuardStatus("abc123", 1, 3, 600.0, "exit 1", None))
    assert (
        fine.status is CheckStatus.OK
        and fine.detail == "candidate abc123: 1 failed start(s) of 3 allowed in 10 min"
    )
    blocked = check_restart_guard(GuardStatus("abc123", 3, 3, 600.0, "CUDA OOM", None))
    assert blocked.status is CheckStatus.REFUSED
    assert (
        blocked.detail
        == "candidate abc123 failed to start 3 times in 10 min (last: CUDA OOM); not retried before later"
    )
    assert blocked.data == {"fingerprint": "abc123", "failures": 3, "retry_at": None}


def view(*cmdline: str) -> ProcessView:
    return ProcessView(4_000_000, 1, "python3", cmdline, "alice", 1000, 0.0)


@pytest.mark.parametrize(
    ("cmdline", "server"),
    [
        (("/usr/bin/vllm", "serve", "org/m"), True),
        (("/opt/venv/bin/vllm-sim", "serve", "m"), True),
        (("python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"), True),
        (("python3", "-m", "vllm_sim", "serve", "m"), True),
        (("vllm", "bench", "serve"), False),
        (("vllm",), False),
        (("python3", "train.py", "--serve"), False),
    ],
)
def test_an_api_server_is_known_by_its_command_line(cmdline: tuple[str, ...], server: bool) -> None:
    assert is_api_server(view(*cmdline)) is server


def test_a_vllm_title_is_read_from_the_start_of_the_command_line_only() -> None:
    assert vllm_title(("VLLM::Worker_TP0",), ("VLLM",)) == "VLLM::Worker_TP0"
    assert vllm_title(("VLLM::EngineCore", "", ""), ("VLLM",)) == "VLLM::EngineCore"
    assert vllm_title(("PROD::Worker_PP1_TP3",), ("VLLM",)) == "PROD::Worker_PP1_TP3", "a known role"
    assert vllm_title(("pgrep", "-f", "VLLM::Worker"), ("VLLM",)) is None
    assert vllm_title(("Foo::Bar",), ("VLLM",)) is None and vllm_title((), ("VLLM",)) is None


def test_a_label_is_short_and_readable() -> None:
    assert view("/usr/bin/python3", "train.py", "--lr", "3e-4").label == "python3 train.py --lr 3e-4"
    assert view("VLLM::Worker_TP0").label == "VLLM::Worker_TP0"
    assert ProcessView(2, 0, "kthreadd", (), "root", 0, 0.0).label == "[kthreadd]"
    long = view("python3", "x" * 200).label
    assert len(long) == 72 and long.endswith("…")


def test_this_process_and_its_parents_are_its_lineage() -> None:
    lineage = my_lineage()
    assert os.getpid() in lineage and os.getppid() in lineage
    assert view_of(0) is None and view_of(4_000_000) is None


def test_host_ram_exactly_at_the_minimum_is_enough() -> None:
    assert check_host_memory(2 * GIB, 2.0).status is CheckStatus.OK
    short = check_host_memory(2 * GIB - 1, 2.0)
    assert short.status is CheckStatus.REFUSED
    assert short.detail == (
        "host RAM: 2.00 GiB available < 2 GiB required (preflight.min_host_available_gib)"
    ), "2.00 shown, yet one byte short: the comparison is on bytes, not on the rounded figure"
    assert short.data == {"available_gib": 2.0}


def test_a_fractional_minimum_is_shown_as_given() -> None:
    result = check_host_memory(GIB // 4, 0.5)
    assert (
        result.detail == "host RAM: 0.25 GiB available < 0.5 GiB required (preflight.min_host_available_gib)"
    )


def test_a_relative_directory_that_exists_is_a_local_model_even_without_dot_slash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`org/name` is a Hub name unless a directory of that name is here: vLLM loads it from disk then."""
    monkeypatch.chdir(tmp_path)
    assert check_model_path("org/name").status is CheckStatus.SKIPPED
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert check_model_path("org/name").detail == "model path org/name is readable"


def test_a_home_relative_model_path_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert check_model_path("~/models/m").detail == "model path ~/models/m does not exist"
    (tmp_path / "models" / "m").mkdir(parents=True)
    assert check_model_path("~/models/m").status is CheckStatus.OK


def test_a_parent_relative_path_is_local_and_judged() -> None:
    missing = check_model_path("../no-such-model-dir-here")
    assert missing.status is CheckStatus.REFUSED and missing.hint == "fix engine.model"
