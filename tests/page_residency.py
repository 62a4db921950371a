"""Page-cache residency of real files, read from the kernel: written and evicted (fsync, then
POSIX_FADV_DONTNEED), and the share of their pages resident by mincore(2) on a mapping of them."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

PAGE = mmap.PAGESIZE
LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
INT = ctypes.c_int
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, INT, INT, INT, ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_share(path: Path) -> float:
    """The share of `path`'s pages in the page cache: mincore(2) on a mapping of it (which reads nothing)."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        pages = (size + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(pages)
        try:
            assert LIBC.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            LIBC.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(byte & 1 for byte in vec.raw) / pages


def write_evicted(path: Path, size: int) -> Path:
    with path.open("wb") as out:
        out.write(os.urandom(size))
        out.flush()
        os.fsync(out.fileno())  # dirty pages cannot be dropped
        os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path
