"""Where `launch probe` measures arm 0 — production as it serves: on the port it serves on now, which
a promoted parked change moves to `park_port` (probe's arm 0 once hung 337 s on engine.port, where
nothing listened). Read as `launch status` reads it; nothing said, and the profile's port is used."""

from __future__ import annotations

import json
from pathlib import Path

from launcher.probe.session import serving_port
from launcher.state.store import StateStore


def promoted(port: int) -> dict[str, object]:
    """last_good.json as a promotion writes it, on `port`."""
    return {"profile": "prod", "fingerprint": "fp", "argv": ["vllm", "serve", "m", "--port", str(port)],
            "env": {}, "host": "127.0.0.1", "port": port, "gate_order": ["health"],
            "expect": {"served_model_names": ["m"], "capture_sizes": None}}  # fmt: skip


def store_with(
    tmp_path: Path, status: dict[str, object] | None, last_good: dict[str, object] | None
) -> StateStore:
    store = StateStore(tmp_path / "state")
    if status is not None:
        store.status_path("prod").parent.mkdir(parents=True, exist_ok=True)
        store.status_path("prod").write_text(json.dumps({"profile": "prod", **status}))
    if last_good is not None:
        store.write_last_good("prod", last_good)
    return store


def test_production_on_its_park_port_is_measured_there(tmp_path: Path) -> None:
    store = store_with(
        tmp_path,
        {"phase": "serving", "serving_fingerprint": "fp"},
        promoted(8001),
    )
    assert serving_port(store, "prod") == 8001


def test_a_stale_or_missing_record_says_nothing(tmp_path: Path) -> None:
    assert serving_port(StateStore(tmp_path / "none"), "prod") is None  # never ran
    stopped = store_with(tmp_path, {"phase": "stopped", "serving_fingerprint": "fp"}, promoted(8001))
    assert serving_port(stopped, "prod") is None  # nothing serves: the profile's engine.port


def test_a_corrupt_status_is_no_answer_not_a_crash(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    store.status_path("prod").parent.mkdir(parents=True, exist_ok=True)
    store.status_path("prod").write_text("{not json")
    assert serving_port(store, "prod") is None
