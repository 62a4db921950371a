"""The power limits of a trial beside production (launcher/host/power_caps.py) over a hand-set GPU
view (FakeGpuProbe): what each limit was is on disk before the first changes; a refusal leaves
nothing changed; a restore puts every limit back and removes the record — also from a record a
killed launcher left; a record that is not one is a problem, never a guess."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from launcher.host.gpu import FakeGpuProbe, PowerLimit
from launcher.host.power_caps import PowerCaps


def probe(*limits_w: float) -> FakeGpuProbe:
    fake = FakeGpuProbe(total_mib=tuple(81920 for _ in limits_w))
    fake.power = {i: PowerLimit(w, 700.0, 100.0, 700.0) for i, w in enumerate(limits_w)}
    return fake


def test_each_gpu_is_lowered_after_its_old_limit_is_recorded_and_put_back_after(tmp_path: Path) -> None:
    gpus = probe(700.0, 650.0)
    record = tmp_path / "power_caps.json"
    seen_on_disk: list[bool] = []
    original = gpus.set_power_limit

    def setting(index: int, watts: float) -> str | None:
        seen_on_disk.append(record.exists())  # the record is there before any limit changes
        return original(index, watts)

    gpus.set_power_limit = setting  # type: ignore[method-assign]
    caps = PowerCaps(lambda: gpus, record)
    why, lowered = caps.lower(["0", "1"], 300)
    assert why is None and [c.was_w for c in lowered] == [700.0, 650.0]
    assert [gpus.power[i].current_w for i in (0, 1)] == [300.0, 300.0] and seen_on_disk == [True, True]
    assert json.loads(record.read_text())["pid"] == os.getpid()
    assert caps.restore() == []
    assert [gpus.power[i].current_w for i in (0, 1)] == [700.0, 650.0] and not record.exists()


def test_a_limit_already_under_the_cap_is_left_alone(tmp_path: Path) -> None:
    gpus = probe(250.0)
    why, lowered = PowerCaps(lambda: gpus, tmp_path / "r.json").lower(["0"], 300)
    assert why is None and lowered == [] and gpus.power_sets == []


def test_nvml_refusing_one_gpu_leaves_every_limit_as_it_was(tmp_path: Path) -> None:
    gpus = probe(700.0, 700.0)
    original = gpus.set_power_limit

    def second_refused(index: int, watts: float) -> str | None:
        if index == 1 and watts == 300:
            return "NVML refused: Insufficient Permissions"
        return original(index, watts)

    gpus.set_power_limit = second_refused  # type: ignore[method-assign]
    record = tmp_path / "r.json"
    why, lowered = PowerCaps(lambda: gpus, record).lower(["0", "1"], 300)
    assert why == "GPU 1: power limit 300 W not set: NVML refused: Insufficient Permissions"
    assert lowered == [] and gpus.power[0].current_w == 700.0  # GPU 0 put back at once
    assert PowerCaps(lambda: gpus, record).restore() == [] and not record.exists()


def test_a_cap_outside_the_gpus_range_or_a_gpu_without_a_limit_is_refused_before_anything_changes(
    tmp_path: Path,
) -> None:
    gpus = probe(700.0)
    why, _ = PowerCaps(lambda: gpus, tmp_path / "r.json").lower(["0"], 50)
    assert why == "GPU 0: 50 W is outside its range 100–700 W"
    gpus.power = {}
    why, _ = PowerCaps(lambda: gpus, tmp_path / "r.json").lower(["0"], 300)
    assert why == "GPU 0 (Fake GPU) reports no power limit"
    why, _ = PowerCaps(lambda: gpus, tmp_path / "r.json").lower(["3"], 300)
    assert why == "GPU 3 is not on this host"
    assert gpus.power_sets == [] and not (tmp_path / "r.json").exists()


def test_no_nvml_means_no_power_control_in_its_words(tmp_path: Path) -> None:
    gpus = FakeGpuProbe(reason="no NVML: libnvidia-ml.so.1 not found")
    why, _ = PowerCaps(lambda: gpus, tmp_path / "r.json").lower(["0"], 300)
    assert why == "no power control: no NVML: libnvidia-ml.so.1 not found"


def test_a_killed_launchers_record_is_restored_by_the_next_one(tmp_path: Path) -> None:
    gpus = probe(700.0)
    record = tmp_path / "r.json"
    PowerCaps(lambda: gpus, record, pid=4242).lower(["0"], 300)  # then SIGKILL: nothing restored
    assert gpus.power[0].current_w == 300.0 and record.exists()
    assert PowerCaps(lambda: gpus, record).restore() == []
    assert gpus.power[0].current_w == 700.0 and not record.exists()


def test_a_record_that_is_not_one_is_kept_and_said_never_guessed(tmp_path: Path) -> None:
    gpus = probe(300.0)
    record = tmp_path / "r.json"
    record.write_text('{"gpus": [{"uuid": 1}]}')
    problems = PowerCaps(lambda: gpus, record).restore()
    assert problems == [f"{record} is not a power-cap record (KeyError); set the limits by hand"]
    assert record.exists() and gpus.power_sets == []
    why, _ = PowerCaps(lambda: gpus, record).lower(["0"], 250)  # and no new trial caps over it
    assert why is not None and why.startswith("the last trial's power limits are not restored")
    record.unlink()
    record.symlink_to(tmp_path / "elsewhere.json")
    (problem,) = PowerCaps(lambda: gpus, record).restore()
    assert str(record) in problem  # a link is not followed


def test_a_record_that_cannot_be_written_lowers_nothing(tmp_path: Path) -> None:
    gpus = probe(700.0)
    record = tmp_path / "r.json"

    def disk_full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    why, lowered = PowerCaps(lambda: gpus, record, write=disk_full).lower(["0"], 300)
    assert why is not None and why.startswith(f"cannot record the power limits in {record}")
    assert lowered == [] and gpus.power_sets == [] and gpus.power[0].current_w == 700.0
