"""A simulated GPU set: GPUs that exist only as files, so a CPU host can run trials beside production.

The simulator writes it (each process holds memory on it, as a CUDA context holds memory on a
card) and the launcher reads it through the same seam as NVML (`launcher/host/gpu_sim.py`), so GPU
locks, free-memory checks and power limits run on a host without a GPU. `VLLM_SIM_GPU_SET` names
the directory, for both sides. Its layout:

- `devices.json`, written once by `create`: each device's index, uuid, name, total and reserved
  MiB, and its power range (`settable` false: NVML refuses a set, as without root).
- `power/<index>.json`: the device's current power limit, `{"limit_w": W}`; absent = the default.
- `held/<pid>.json`: what one process holds, `{pid, create_time, gpus: {index: MiB}, state,
  title}`, written only by that process. A file whose pid no longer runs, or runs as another
  process (its create_time differs: pid reuse), counts for nothing: the driver frees a dead
  process's memory. A reader deletes the file of a pid that no longer exists at all.
- `events.jsonl`: one line per event (`load_begin`, `load_end`, `sleep`, `wake`, `exit`), appended
  with O_APPEND in a single write, so lines are never torn and a test can prove that no two
  engines were loading on one GPU at once.

Every file is written atomically (temp, fsync, rename) and read as hostile: not through a link,
not larger than `MAX_FILE_BYTES` (the events: `MAX_EVENTS_BYTES`), not a FIFO. What makes the set
unusable (devices.json or a power file unreadable) raises `SimGpuError` with a sentence naming the
file; one bad holder file or event line is ignored (it cannot be any holder's: holders write
whole files), so one planted file never hides every other holder.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

ENV = "VLLM_SIM_GPU_SET"
MAX_FILE_BYTES = 1 << 20
MAX_EVENTS_BYTES = 64 << 20
MAX_DEVICES = 64
STATES = ("loading", "loaded", "asleep")
EVENTS = ("load_begin", "load_end", "sleep", "wake", "exit")
_SAME_PROCESS_S = 0.05  # psutil's create_time of one process, read twice, agrees far closer than this


class SimGpuError(Exception):
    """The set cannot be read, or refuses what was asked; the message names the file or the rule."""


class PowerNotPermitted(SimGpuError):
    """The device refuses a power limit, in NVML's words (NVML_ERROR_NO_PERMISSION)."""


class PowerOutOfRange(SimGpuError):
    """A power limit outside the device's range; NVML answers NVML_ERROR_INVALID_ARGUMENT."""


@dataclass(frozen=True, slots=True)
class Power:
    default_w: float
    min_w: float
    max_w: float
    settable: bool = True


@dataclass(frozen=True, slots=True)
class SimDevice:
    index: int
    uuid: str
    name: str
    total_mib: int
    reserved_mib: int
    power: Power

    @property
    def usable_mib(self) -> int:
        """What CUDA reports as the total (NVML's less the reserved part): vLLM's util multiplies it."""
        return self.total_mib - self.reserved_mib


@dataclass(frozen=True, slots=True)
class Holder:
    """One process's hold on the set: MiB per device index, and how far its engine is."""

    pid: int
    create_time: float
    gpus: Mapping[int, int]
    state: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    pid: int
    gpus: Mapping[int, int]
    event: str


def create(
    directory: Path | str,
    count: int,
    total_mib: int,
    *,
    reserved_mib: int = 0,
    power_default_w: float = 700,
    power_min_w: float = 100,
    power_max_w: float = 700,
    settable: bool = True,
) -> SimGpuSet:
    """A new set of `count` alike devices in `directory` (created; an existing set is refused)."""
    if not 1 <= count <= MAX_DEVICES or not 0 <= reserved_mib < total_mib:
        raise SimGpuError(f"a set needs 1..{MAX_DEVICES} devices and 0 <= reserved_mib < total_mib")
    if not power_min_w <= power_default_w <= power_max_w:
        raise SimGpuError("power: min_w <= default_w <= max_w")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    if (root / "devices.json").exists():
        raise SimGpuError(f"{root / 'devices.json'} exists: a set is created once")
    power = {"default_w": power_default_w, "min_w": power_min_w, "max_w": power_max_w, "settable": settable}
    devices = [
        {
            "index": i,
            "uuid": f"GPU-5157a000-0000-4000-8000-{i:012d}",
            "name": "Simulated GPU",
            "total_mib": total_mib,
            "reserved_mib": reserved_mib,
            "power": power,
        }
        for i in range(count)
    ]
    _write_atomic(root / "devices.json", json.dumps(devices, indent=1))
    for sub in ("held", "power"):
        (root / sub).mkdir(exist_ok=True)
    return SimGpuSet(root)


class SimGpuSet:
    """The set in `directory`. Reads go to the files each time: other processes change them."""

    def __init__(self, directory: Path | str) -> None:
        self.root = Path(directory)

    # --- devices and memory ---
    def devices(self) -> tuple[SimDevice, ...]:
        """Every device, as written at creation; `SimGpuError` when devices.json is unusable."""
        path = self.root / "devices.json"
        raw = _read_json(path)
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_DEVICES:
            raise SimGpuError(f"{path}: not a list of 1..{MAX_DEVICES} devices")
        try:
            devices = tuple(_device(entry) for entry in raw)
        except (KeyError, TypeError, ValueError) as err:
            raise SimGpuError(f"{path}: a device is malformed ({err!r})") from None
        if [d.index for d in devices] != list(range(len(devices))):
            raise SimGpuError(f"{path}: device indexes must be 0..{len(devices) - 1} in order")
        return devices

    def device(self, index: int) -> SimDevice:
        devices = self.devices()
        if not 0 <= index < len(devices):
            raise SimGpuError(f"{self.root}: no device {index} (the set has {len(devices)})")
        return devices[index]

    def holders(self) -> list[Holder]:
        """The live holders, by pid; a dead pid's file is deleted, a reused pid's ignored."""
        found = []
        for path in self._held_files():
            holder = _holder(path)
            if holder is None:
                continue
            liveness = _liveness(holder)
            if liveness == "gone":
                path.unlink(missing_ok=True)
            elif liveness == "same":
                found.append(holder)
        return sorted(found, key=lambda h: h.pid)

    def held(self) -> dict[int, dict[int, int]]:
        """Device index → pid → MiB, live holders only."""
        per_device: dict[int, dict[int, int]] = {}
        for holder in self.holders():
            for index, mib in holder.gpus.items():
                per_device.setdefault(index, {})[holder.pid] = mib
        return per_device

    def free_mib(self, index: int) -> int:
        """What CUDA would report free: total − reserved − what live holders hold (never below 0)."""
        device = self.device(index)
        used = sum(self.held().get(index, {}).values())
        return max(0, device.usable_mib - used)

    def hold(self, pid: int, gpus: Mapping[int, int], state: str, title: str = "") -> None:
        """Record what `pid` (the caller itself) holds now: replaces its previous hold."""
        if state not in STATES:
            raise SimGpuError(f"state {state!r} is not one of {', '.join(STATES)}")
        record = {
            "pid": pid,
            "create_time": psutil.Process(pid).create_time(),
            "gpus": {str(i): int(mib) for i, mib in gpus.items()},
            "state": state,
            "title": title,
        }
        (self.root / "held").mkdir(exist_ok=True)
        _write_atomic(self.root / "held" / f"{pid}.json", json.dumps(record))

    def release(self, pid: int) -> None:
        (self.root / "held" / f"{pid}.json").unlink(missing_ok=True)

    # --- power ---
    def power_limit_w(self, index: int) -> float:
        """The current limit: the power file's, else the device's default."""
        device = self.device(index)
        path = self._power_file(index)
        if not os.path.lexists(path):
            return device.power.default_w
        raw = _read_json(path)
        limit: Any = raw.get("limit_w") if isinstance(raw, dict) else None
        if not _is_number(limit):
            raise SimGpuError(f"{path}: no number limit_w")
        return float(limit)

    def set_power_limit_w(self, index: int, watts: float) -> None:
        """Set the limit, or raise `PowerNotPermitted` / `PowerOutOfRange` as NVML refuses it."""
        power = self.device(index).power
        if not power.settable:
            raise PowerNotPermitted("Insufficient Permissions")
        if not _is_number(watts) or not power.min_w <= watts <= power.max_w:
            raise PowerOutOfRange(f"{watts:g} W is outside {power.min_w:g}–{power.max_w:g} W")
        (self.root / "power").mkdir(exist_ok=True)
        _write_atomic(self._power_file(index), json.dumps({"limit_w": float(watts)}))

    # --- events ---
    def event(self, pid: int, gpus: Mapping[int, int], event: str, t: float | None = None) -> None:
        """Append one event line, in one O_APPEND write (never torn, never interleaved)."""
        if event not in EVENTS:
            raise SimGpuError(f"event {event!r} is not one of {', '.join(EVENTS)}")
        record = {
            "t": time.time() if t is None else t,
            "pid": pid,
            "gpus": {str(i): int(mib) for i, mib in gpus.items()},
            "event": event,
        }
        line = (json.dumps(record) + "\n").encode()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(self.root / "events.jsonl", flags, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SimGpuError(f"{self.root / 'events.jsonl'}: not a regular file")
            os.write(fd, line)
        finally:
            os.close(fd)

    def events(self) -> list[Event]:
        """Every event in the order written; an unreadable line is skipped, no file is none yet."""
        path = self.root / "events.jsonl"
        if not os.path.lexists(path):
            return []
        text = _read_bytes(path, MAX_EVENTS_BYTES).decode("utf-8", errors="replace")
        return [e for e in (_event(line) for line in text.splitlines()) if e is not None]

    def _held_files(self) -> list[Path]:
        try:
            entries = sorted((self.root / "held").iterdir())
        except FileNotFoundError:
            return []
        except OSError as err:
            raise SimGpuError(f"{self.root / 'held'}: {err.strerror}") from None
        return [p for p in entries if p.suffix == ".json" and p.stem.isdigit()]

    def _power_file(self, index: int) -> Path:
        return self.root / "power" / f"{index}.json"


def _device(entry: Any) -> SimDevice:
    power = entry["power"]
    values = (power["default_w"], power["min_w"], power["max_w"])
    if not all(_is_number(v) for v in values) or not isinstance(power["settable"], bool):
        raise ValueError("power needs numbers default_w, min_w, max_w and a bool settable")
    total, reserved = _count(entry["total_mib"]), _count(entry["reserved_mib"])
    if reserved >= total:
        raise ValueError("reserved_mib must be less than total_mib")
    return SimDevice(
        index=_count(entry["index"]),
        uuid=str(entry["uuid"]),
        name=str(entry["name"]),
        total_mib=total,
        reserved_mib=reserved,
        power=Power(float(values[0]), float(values[1]), float(values[2]), power["settable"]),
    )


def _holder(path: Path) -> Holder | None:
    """A holder file read, or None when it is not one (corrupt, a link, too big, another pid's name)."""
    try:
        raw = _read_json(path)
        gpus = _gpus(raw["gpus"])
        pid, started = int(raw["pid"]), float(raw["create_time"])
        holder = Holder(pid, started, gpus, str(raw["state"]), str(raw.get("title", "")))
    except (SimGpuError, KeyError, TypeError, ValueError):
        return None
    if holder.pid != int(path.stem) or holder.state not in STATES:
        return None
    return holder


def _liveness(holder: Holder) -> str:
    """ "same": the holder runs; "gone": no such pid (or a zombie); "other": the pid is another's now."""
    try:
        process = psutil.Process(holder.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return "gone"
        started = process.create_time()
    except psutil.NoSuchProcess:
        return "gone"
    except psutil.Error:
        return "other"
    return "same" if abs(started - holder.create_time) < _SAME_PROCESS_S else "other"


def _event(line: str) -> Event | None:
    try:
        raw = json.loads(line)
        event = Event(float(raw["t"]), int(raw["pid"]), _gpus(raw["gpus"]), str(raw["event"]))
    except (KeyError, TypeError, ValueError):
        return None
    return event if event.event in EVENTS else None


def _gpus(raw: Any) -> dict[int, int]:
    if not isinstance(raw, dict) or len(raw) > MAX_DEVICES:
        raise ValueError("gpus must be an object of at most MAX_DEVICES entries")
    return {_count(int(index)): _count(mib) for index, mib in raw.items()}


def _count(value: Any) -> int:
    """A non-negative int (JSON's bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a non-negative integer")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(_read_bytes(path, MAX_FILE_BYTES))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise SimGpuError(f"{path}: not JSON ({err})") from None


def _read_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes: not through a link, not a FIFO or device, not more than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        why = "a symbolic link; not followed" if err.errno == errno.ELOOP else err.strerror
        raise SimGpuError(f"{path}: {why}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SimGpuError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise SimGpuError(f"{path}: larger than {limit} bytes")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while read
                raise SimGpuError(f"{path}: larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    """Temp file beside `path`, fsync, rename over it: a reader sees the old file or the new."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
