"""The weight files read into the page cache, on real files: written, evicted (fsync, then
POSIX_FADV_DONTNEED), warmed, and their residency read back with the kernel's own mincore(2)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from basis.clock import SYSTEM_CLOCK
from launcher.host.page_cache import (
    GIB,
    WeightFiles,
    cached_share,
    model_cached_share,
    warm,
    warm_room,
    weight_files,
)
from tests.page_residency import resident_share, write_evicted

MIB = 1 << 20
PAGE = mmap.PAGESIZE


def model_dir(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    root.mkdir()
    for index in range(3):
        write_evicted(root / f"model-0000{index}-of-00003.safetensors", 2 * MIB + index * PAGE)
    (root / "config.json").write_text("{}")
    return root


def test_warming_a_model_dir_puts_its_evicted_weight_files_in_the_page_cache(tmp_path: Path) -> None:
    root = model_dir(tmp_path)
    files = sorted(root.glob("*.safetensors"))
    if max(resident_share(f) for f in files) > 0.5:
        pytest.skip("this filesystem keeps pages DONTNEED should drop: eviction cannot be shown here")
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles) and found.files == tuple(files)
    done = warm(found, SYSTEM_CLOCK, SYSTEM_CLOCK.monotonic() + 600)
    assert [resident_share(f) for f in files] == [1.0, 1.0, 1.0]
    assert done.complete and done.files == 3 and done.bytes == found.total_bytes == 6 * MIB + 3 * PAGE
    assert done.as_record()["total_bytes"] == found.total_bytes


def test_vllm_s_order_decides_which_files_are_read(tmp_path: Path) -> None:
    """safetensors, else bin, else pt (vLLM's default loader), else GGUF; a single GGUF file as the model."""
    root = tmp_path / "m"
    root.mkdir()
    for name in ("pytorch_model.bin", "extra.pt", "q4.gguf"):
        (root / name).write_bytes(b"x")
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles) and [p.name for p in found.files] == ["pytorch_model.bin"]
    (root / "pytorch_model.bin").unlink()
    (root / "extra.pt").unlink()
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles) and [p.name for p in found.files] == ["q4.gguf"]
    single = weight_files(str(root / "q4.gguf"))
    assert isinstance(single, WeightFiles) and single.files == (root / "q4.gguf",)


def test_links_out_of_the_model_dir_and_files_that_are_not_regular_are_never_read(tmp_path: Path) -> None:
    outside = write_evicted(tmp_path / "secret.safetensors", MIB)
    root = tmp_path / "model"
    root.mkdir()
    inner = write_evicted(root / "a.safetensors", MIB)
    (root / "b.safetensors").symlink_to(outside)  # out of the model dir
    (root / "c.safetensors").symlink_to(inner)  # inside: the same file, read once
    os.mkfifo(root / "d.safetensors")  # would block a plain open
    (root / "e.safetensors").mkdir()
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles) and set(found.files) == {inner}
    if resident_share(outside) > 0.5:
        pytest.skip("this filesystem keeps pages DONTNEED should drop")
    warm(found, SYSTEM_CLOCK, SYSTEM_CLOCK.monotonic() + 600)
    assert resident_share(outside) == 0.0 and resident_share(inner) == 1.0


class StepClock:
    """Each reading is one second later: the deadline comes after a known number of reads."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, event: object, timeout_s: float | None) -> bool:
        return False


def test_the_deadline_stops_the_read_and_says_how_far_it_got(tmp_path: Path) -> None:
    root = model_dir(tmp_path)
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles)
    clock = StepClock()
    done = warm(found, clock, deadline=3.5)  # started at 1: reads at 2 and 3, then the deadline
    assert not done.complete and done.files < 3 and done.bytes < found.total_bytes


@pytest.mark.parametrize(
    ("model", "why"),
    [
        (None, "no engine.model"),
        ("Qwen/Qwen3-0.6B", "is a hub name"),
        ("/nonexistent/model", "No such file"),
    ],
)
def test_what_is_not_a_local_model_is_skipped_with_the_reason(model: str | None, why: str) -> None:
    found = weight_files(model)
    assert isinstance(found, str) and why in found


def test_an_empty_dir_and_a_file_that_is_no_gguf_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert "no *.safetensors" in str(weight_files(str(tmp_path)))
    assert "no GGUF" in str(weight_files(str(tmp_path / "config.json")))


def test_host_ram_must_hold_the_weights_beside_the_park_and_the_floor() -> None:
    assert warm_room(10 * GIB, 40 * GIB, 20 * GIB, 2.0) is None
    why = warm_room(10 * GIB, 30 * GIB, 20 * GIB, 2.0)
    assert why is not None and "30.0 GiB available" in why and "20.0 GiB for the park" in why
    assert warm_room(10 * GIB, 11 * GIB, 0, 2.0) is not None


def test_a_file_gone_since_it_was_listed_leaves_the_read_incomplete(tmp_path: Path) -> None:
    root = model_dir(tmp_path)
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles)
    found.files[1].unlink()
    done = warm(found, SYSTEM_CLOCK, SYSTEM_CLOCK.monotonic() + 600)
    assert not done.complete and done.files == 2 and done.bytes == found.total_bytes - 2 * MIB - PAGE


def test_the_cached_share_is_what_the_kernel_says_before_and_after_a_read(tmp_path: Path) -> None:
    """mincore(2) on a mapping, a GiB window at a time: the share a start's weight GB/s is measured
    against; the oracle is the tests' own mincore reading of each file."""
    root = model_dir(tmp_path)
    files = sorted(root.glob("*.safetensors"))
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles)
    expected = sum(resident_share(f) * f.stat().st_size for f in files) / found.total_bytes
    assert cached_share(found) == pytest.approx(expected, abs=0.01)
    files[0].read_bytes()
    expected = sum(resident_share(f) * f.stat().st_size for f in files) / found.total_bytes
    assert cached_share(found) == pytest.approx(expected, abs=0.01)
    warm(found, SYSTEM_CLOCK, SYSTEM_CLOCK.monotonic() + 600)
    assert cached_share(found) == model_cached_share(str(root)) == 1.0


def test_no_share_for_a_hub_name_or_a_file_gone(tmp_path: Path) -> None:
    assert model_cached_share("org/model") is None
    root = model_dir(tmp_path)
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles)
    found.files[1].unlink()
    assert cached_share(found) is None  # the kernel cannot say for a file that is gone: no figure
