"""The candidate's weight files read into the page cache while production still serves (issue 44).

A change's outage (production parked or stopped until the candidate serves) included the disk: a
field report spent 43 minutes reading weights, where a load from the page cache runs at GB/s. So
before production is parked or stopped, the files vLLM will read are read once here, while it
still serves; vLLM's own load then finds them in memory. Only where host RAM holds them beside
what a park moves there and `preflight.min_host_available_gib` (`warm_room`): pages the kernel
must evict again for the sleeper's pinned weights were read for nothing.

Which files: those vLLM's default loader reads of a local model dir (vLLM 0.26.0
`model_executor/model_loader/default_loader.py` `_prepare_weights`: the first of `*.safetensors`,
`*.bin`, `*.pt` that matches at the top level), else its `*.gguf`; or the model itself when it is
one GGUF file. A hub name is not resolved: the snapshot vLLM loads depends on `--revision`, the
profile's `HF_HOME`/`HF_HUB_CACHE` and the service user's home, and its files are links into
`blobs/`, which the rule below refuses — it is skipped with that reason.

Hostile trees are normal: a link is followed only when it stays inside the model dir, anything
that is not a regular file is skipped (opened without blocking, checked on the open descriptor),
and the read stops at its deadline, so a slow disk never delays the change beyond it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basis.clock import Clock

GIB = 1 << 30
CHUNK = 16 << 20  # one large read at a time: sequential, few syscalls
PATTERNS = (".safetensors", ".bin", ".pt")  # vLLM's order: the first that matches is what it loads
GGUF = ".gguf"


@dataclass(frozen=True, slots=True)
class WeightFiles:
    """The regular files a start would read, each inside `root`, and their size in all."""

    root: Path
    files: tuple[Path, ...]
    total_bytes: int


@dataclass(frozen=True, slots=True)
class Warmed:
    """What one warm read did: the figure for the history and the progress line."""

    files: int
    bytes: int
    total_bytes: int
    seconds: float
    complete: bool  # False: the deadline came first (what was read stays read)

    @property
    def gb_per_s(self) -> float | None:
        return round(self.bytes / self.seconds / 1e9, 2) if self.seconds > 0 else None

    def as_record(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "total_bytes": self.total_bytes,
            "seconds": round(self.seconds, 3),
            "gb_s": self.gb_per_s,
            "complete": self.complete,
        }


def weight_files(model: str | None) -> WeightFiles | str:
    """The weight files of `model` (a local dir, or one GGUF file), else why there are none to read."""
    if not model:
        return "no engine.model"
    path = Path(model).expanduser()
    if not (model.startswith(("/", "./", "../", "~")) or path.exists()):
        return f"{model!r} is a hub name: vLLM resolves its snapshot (revision, HF cache), not warmed"
    try:
        root = path.resolve(strict=True)
    except (OSError, RuntimeError) as err:
        return f"model path {model}: {getattr(err, 'strerror', None) or err}"
    if root.is_file():
        if root.suffix != GGUF:
            return f"model path {model} is a file but no GGUF"
        return WeightFiles(root.parent, (root,), root.stat().st_size)  # resolved: no link left
    if not root.is_dir():
        return f"model path {model} is neither a directory nor a file"
    found = _dir_weights(root)
    if not found:
        return f"no *.safetensors, *.bin, *.pt or *.gguf file in {root}"
    return WeightFiles(root, tuple(path for path, _ in found), sum(size for _, size in found))


def _dir_weights(root: Path) -> list[tuple[Path, int]]:
    try:
        names = sorted(entry.name for entry in os.scandir(root) if not entry.name.startswith("."))
    except OSError:
        return []
    for suffixes in (*((s,) for s in PATTERNS), (GGUF,)):
        found = [p for p in (_inside(root, n) for n in names if n.endswith(suffixes)) if p is not None]
        if found:
            return found
    return []


def _inside(root: Path, name: str) -> tuple[Path, int] | None:
    """The regular file `root/name` is (through links that stay inside `root`) and its size, else None."""
    try:
        real = (root / name).resolve(strict=True)
        found = real.stat()
    except (OSError, RuntimeError):
        return None
    return (real, found.st_size) if real.is_relative_to(root) and stat.S_ISREG(found.st_mode) else None


def warm_room(total_bytes: int, available_bytes: int, park_bytes: int, floor_gib: float) -> str | None:
    """Why host RAM cannot hold the weights read beside what a park pins there (None: it can)."""
    left = available_bytes - park_bytes - floor_gib * GIB
    if total_bytes <= left:
        return None
    park = f", {park_bytes / GIB:.1f} GiB for the park's weights" if park_bytes else ""
    return (
        f"host RAM: {available_bytes / GIB:.1f} GiB available cannot hold {total_bytes / GIB:.1f} GiB "
        f"of weights beside {floor_gib:g} GiB kept free{park}"
    )


def warm(weights: WeightFiles, clock: Clock, deadline: float) -> Warmed:
    """Read every file once, in large reads, until `deadline` (monotonic): afterwards its pages are
    in the page cache, as far as the kernel keeps them."""
    started = clock.monotonic()
    buffer = bytearray(CHUNK)
    done_files, done_bytes = 0, 0
    for path in weights.files:
        if clock.monotonic() >= deadline:
            break
        read, finished = _read_file(path, buffer, clock, deadline)
        done_bytes += read
        done_files += finished
    complete = done_files == len(weights.files)  # a file gone since it was listed is not read either
    return Warmed(done_files, done_bytes, weights.total_bytes, clock.monotonic() - started, complete)


def _read_file(path: Path, buffer: bytearray, clock: Clock, deadline: float) -> tuple[int, bool]:
    """(bytes read, whether to the end); a file that went away or is no regular file reads nothing.
    O_NOFOLLOW: the path was resolved inside the model dir, a link swapped in since is not followed;
    O_NONBLOCK: a FIFO swapped in does not block the open."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return 0, False
    view, total = memoryview(buffer), 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0, False
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # the kernel reads ahead further
        while clock.monotonic() < deadline:
            got = os.readv(fd, [view])
            if got == 0:
                return total, True
            total += got
        return total, False
    except OSError:
        return total, False
    finally:
        os.close(fd)


WINDOW = 1 << 30  # mincore(2) a GiB of a mapping at a time: a page map of 256 KiB, however large the file


def model_cached_share(model: str | None) -> float | None:
    """`cached_share` of `model`'s weight files; None for a hub name or no files."""
    found = weight_files(model)
    return None if isinstance(found, str) else cached_share(found)


def cached_share(weights: WeightFiles) -> float | None:
    """The share of the weights' bytes in the page cache now, by mincore(2) on mappings of the files
    (which reads nothing): what a start's weight GB/s was measured against (the timeline records it
    beside the phase). None where the kernel does not say."""
    if weights.total_bytes <= 0 or _LIBC is None:
        return None
    resident = 0
    for path in weights.files:
        got = _resident_bytes(path)
        if got is None:
            return None
        resident += got
    return round(min(1.0, resident / weights.total_bytes), 3)


def _resident_bytes(path: Path) -> int | None:
    assert _LIBC is not None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        resident = 0
        for start in range(0, size, WINDOW):
            length = min(WINDOW, size - start)
            got = _window_pages(fd, start, length)
            if got is None:
                return None
            resident += min(got * mmap.PAGESIZE, length)
        return resident
    finally:
        os.close(fd)


def _window_pages(fd: int, offset: int, length: int) -> int | None:
    """Resident pages of one window of the file (mapped, asked, unmapped)."""
    assert _LIBC is not None
    addr = _LIBC.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr in (None, ctypes.c_void_p(-1).value):
        return None
    try:
        pages = (length + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        if _LIBC.mincore(addr, length, vec) != 0:
            return None
        return sum(byte & 1 for byte in vec.raw)
    finally:
        _LIBC.munmap(addr, length)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()
