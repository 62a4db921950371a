"""The simulated GPU set's format (basis/simgpus.py) with real processes as holders: what a live
holder holds counts, a dead one's file is pruned, a reused pid's is ignored, a planted or corrupt
file is a clear error (devices, power) or no holder at all (held/), and power limits are refused
as NVML refuses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from basis import simgpus
from basis.simgpus import PowerNotPermitted, PowerOutOfRange, SimGpuError, SimGpuSet


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A real process that holds memory on the set until the test ends it."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()  # reaped: the pid no longer exists


def test_create_writes_devices_and_a_second_create_is_refused(tmp_path: Path) -> None:
    gpus = simgpus.create(tmp_path, 2, 81559, reserved_mib=559, power_default_w=700, power_min_w=200)
    devices = gpus.devices()
    assert [d.index for d in devices] == [0, 1]
    assert devices[1].usable_mib == 81000 and devices[1].power.min_w == 200 and devices[1].power.settable
    assert devices[0].uuid != devices[1].uuid
    with pytest.raises(SimGpuError, match="created once"):
        simgpus.create(tmp_path, 1, 1000)


@pytest.mark.parametrize(
    ("count", "total", "reserved", "power"),
    [(0, 1000, 0, (700, 100, 700)), (1, 1000, 1000, (700, 100, 700)), (1, 1000, 0, (50, 100, 700))],
)
def test_create_refuses_an_impossible_set(
    tmp_path: Path, count: int, total: int, reserved: int, power: tuple[int, int, int]
) -> None:
    default_w, min_w, max_w = power
    with pytest.raises(SimGpuError):
        simgpus.create(
            tmp_path, count, total, reserved_mib=reserved, power_default_w=default_w, power_min_w=min_w,
            power_max_w=max_w,
        )  # fmt: skip
    assert not (tmp_path / "devices.json").exists()


def test_hold_counts_until_release(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    gpus = simgpus.create(tmp_path, 2, 10000, reserved_mib=1000)
    gpus.hold(child.pid, {0: 4000, 1: 500}, "loading", "VLLM::EngineCore")
    gpus.hold(os.getpid(), {0: 1000}, "loaded")
    assert gpus.held() == {0: {child.pid: 4000, os.getpid(): 1000}, 1: {child.pid: 500}}
    assert gpus.free_mib(0) == 9000 - 5000 and gpus.free_mib(1) == 8500
    theirs = next(h for h in gpus.holders() if h.pid == child.pid)
    assert theirs.state == "loading" and theirs.title == "VLLM::EngineCore"
    gpus.hold(child.pid, {0: 300}, "asleep")  # a new hold replaces the old one
    assert gpus.held()[0][child.pid] == 300 and 1 not in gpus.held()
    gpus.release(child.pid)
    gpus.release(os.getpid())
    assert gpus.held() == {} and gpus.free_mib(0) == 9000


def test_a_dead_holder_frees_its_memory_and_its_file_is_pruned(
    tmp_path: Path, child: subprocess.Popen[bytes]
) -> None:
    gpus = simgpus.create(tmp_path, 1, 10000)
    gpus.hold(child.pid, {0: 6000}, "loaded")
    assert gpus.free_mib(0) == 4000
    _end(child)
    assert gpus.free_mib(0) == 10000
    assert not (tmp_path / "held" / f"{child.pid}.json").exists()


def test_a_reused_pid_holds_nothing_and_its_file_is_left(tmp_path: Path) -> None:
    """The file names this test's pid with another process's start time: the pid was reused."""
    gpus = simgpus.create(tmp_path, 1, 10000)
    started = psutil.Process().create_time()
    record = {"pid": os.getpid(), "create_time": started - 3600, "gpus": {"0": 5000}, "state": "loaded"}
    path = tmp_path / "held" / f"{os.getpid()}.json"
    path.write_text(json.dumps(record))
    assert gpus.free_mib(0) == 10000 and gpus.holders() == []
    assert path.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[]",
        b'{"pid": 1, "create_time": 0, "gpus": {"0": 5}, "state": "loaded"}',  # another pid's name
        b'{"pid": PID, "create_time": NOW, "gpus": {"0": -5}, "state": "loaded"}',
        b'{"pid": PID, "create_time": NOW, "gpus": {"0": 5}, "state": "dreaming"}',
        b'{"pid": PID, "create_time": NOW, "gpus": {"0": true}, "state": "loaded"}',
        b"\xff\xfe",
        b"[" * 100000,
    ],
)
def test_a_corrupt_holder_file_is_no_holder(tmp_path: Path, content: bytes) -> None:
    gpus = simgpus.create(tmp_path, 1, 10000)
    gpus.hold(os.getpid(), {0: 1000}, "loaded")
    pid = os.getppid()  # a live process of ours that never holds: the file's name
    now = psutil.Process(pid).create_time()
    text = content.replace(b"PID", str(pid).encode()).replace(b"NOW", repr(now).encode())
    (tmp_path / "held" / f"{pid}.json").write_bytes(text)
    assert gpus.held() == {0: {os.getpid(): 1000}}


def test_a_linked_or_huge_holder_file_is_no_holder(tmp_path: Path) -> None:
    gpus = simgpus.create(tmp_path, 1, 10000)
    pid = os.getppid()
    real = {"pid": pid, "create_time": psutil.Process(pid).create_time(), "gpus": {"0": 9}, "state": "loaded"}
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(real))
    (tmp_path / "held" / f"{pid}.json").symlink_to(elsewhere)
    assert gpus.held() == {}
    (tmp_path / "held" / f"{pid}.json").unlink()
    (tmp_path / "held" / f"{pid}.json").write_text(json.dumps(real) + " " * simgpus.MAX_FILE_BYTES)
    assert gpus.held() == {}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{", "not JSON"),
        (b"{}", "not a list"),
        (b"[]", "not a list"),
        (b'[{"index": 0}]', "malformed"),
        (b" " * (simgpus.MAX_FILE_BYTES + 1), "larger than"),
    ],
)
def test_corrupt_devices_are_a_clear_error(tmp_path: Path, content: bytes, says: str) -> None:
    (tmp_path / "devices.json").write_bytes(content)
    with pytest.raises(SimGpuError, match=says) as caught:
        SimGpuSet(tmp_path).devices()
    assert "devices.json" in str(caught.value)


def test_devices_out_of_order_or_linked_are_refused(tmp_path: Path) -> None:
    good = simgpus.create(tmp_path / "good", 2, 1000)
    devices = json.loads((tmp_path / "good" / "devices.json").read_text())
    (tmp_path / "devices.json").write_text(json.dumps(devices[::-1]))
    with pytest.raises(SimGpuError, match="in order"):
        SimGpuSet(tmp_path).devices()
    (tmp_path / "devices.json").unlink()
    (tmp_path / "devices.json").symlink_to(good.root / "devices.json")
    with pytest.raises(SimGpuError, match="symbolic link"):
        SimGpuSet(tmp_path).devices()


def test_a_missing_set_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SimGpuError, match="devices.json"):
        SimGpuSet(tmp_path / "nowhere").free_mib(0)
    with pytest.raises(SimGpuError, match="no device 3"):
        simgpus.create(tmp_path / "set", 2, 1000).free_mib(3)


def test_power_limit_default_set_and_refusals(tmp_path: Path) -> None:
    gpus = simgpus.create(tmp_path, 2, 1000, power_default_w=700, power_min_w=100, power_max_w=700)
    assert gpus.power_limit_w(0) == 700
    gpus.set_power_limit_w(1, 450)
    assert gpus.power_limit_w(1) == 450 and gpus.power_limit_w(0) == 700
    for watts in (99.0, 701.0, float("nan")):
        with pytest.raises(PowerOutOfRange, match="outside 100–700 W"):
            gpus.set_power_limit_w(0, watts)
    assert gpus.power_limit_w(0) == 700


def test_a_device_that_is_not_settable_refuses_as_nvml_does(tmp_path: Path) -> None:
    gpus = simgpus.create(tmp_path, 1, 1000, settable=False)
    with pytest.raises(PowerNotPermitted, match="^Insufficient Permissions$"):
        gpus.set_power_limit_w(0, 400)
    assert gpus.power_limit_w(0) == 700


@pytest.mark.parametrize("content", [b"{", b'{"limit_w": "high"}', b'{"limit_w": true}', b"[]"])
def test_a_corrupt_power_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    gpus = simgpus.create(tmp_path, 1, 1000)
    (tmp_path / "power" / "0.json").write_bytes(content)
    with pytest.raises(SimGpuError, match="0.json"):
        gpus.power_limit_w(0)


def test_events_append_in_order_and_skip_bad_lines(tmp_path: Path) -> None:
    gpus = simgpus.create(tmp_path, 1, 1000)
    gpus.event(11, {0: 500}, "load_begin", t=1.0)
    with (tmp_path / "events.jsonl").open("a") as planted:
        planted.write("not json\n" + json.dumps({"t": 1.5, "pid": 1, "gpus": {}, "event": "boom"}) + "\n")
    gpus.event(11, {0: 500}, "load_end", t=2.0)
    events = gpus.events()
    assert [(e.pid, e.event, e.t, dict(e.gpus)) for e in events] == [
        (11, "load_begin", 1.0, {0: 500}),
        (11, "load_end", 2.0, {0: 500}),
    ]
    with pytest.raises(SimGpuError, match="not one of"):
        gpus.event(11, {}, "explode")


def test_events_from_many_processes_are_never_torn(tmp_path: Path) -> None:
    simgpus.create(tmp_path, 1, 1000)
    writer = (
        "import sys; from basis.simgpus import SimGpuSet\n"
        "s = SimGpuSet(sys.argv[1])\n"
        "for i in range(200): s.event(int(sys.argv[2]), {0: i}, 'load_begin')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(tmp_path), str(n)]) for n in range(4)]
    assert [p.wait() for p in procs] == [0] * 4
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == 800 and all(json.loads(line)["event"] == "load_begin" for line in lines)
    assert len(SimGpuSet(tmp_path).events()) == 800
