"""Fuzz the readers of every file the launcher reads: profiles, state records, history. Whatever the
bytes, the answer is a value or a BadInput (exit 2, one paragraph) — never another exception.
Bounded (examples and deadline) so the whole file runs in a few seconds."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launcher.errors import BadInput
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.state.store import StateStore
from launcher.supervisor.history import History
from launcher.supervisor.status import read_status

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
KEYS = ["profile", "fingerprint", "argv", "env", "host", "port", "gate_order", "expect", "phase",
        "launcher_pid", "gates", "engine_pid", "served_model_names", "ts", "event"]  # fmt: skip
records = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=9)
toml_bits = st.sampled_from([
    "[engine]\n", "[args]\n", "[gates]\n", "[gates.health]\n", "[env]\n", "[supervisor]\n",
    'model = "m"\n', "port = 8000\n", "poll_s = 0\n", "order = []\n", 'extends = "p"\n',
    'command = ["vllm-sim", "serve"]\n', "timeout_s = nan\n", "x = [[[[1]]]]\n", "max_num_seqs = 4\n",
    'api_key_env = "A\\nB"\n', "required = false\n", '"k" = { a = 1 }\n', "= broken\n",
])  # fmt: skip


def _put(root: Path, name: str, data: bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@FUZZ
@given(st.lists(toml_bits, max_size=12), st.binary(max_size=40))
def test_profile_reader_answers_a_plan_or_bad_input(bits: list[str], noise: bytes) -> None:
    for data in ("".join(bits).encode(), "".join(bits).encode() + noise):
        with tempfile.TemporaryDirectory() as tmp:
            _put(Path(tmp), "p.toml", data)
            with contextlib.suppress(BadInput):
                build_plan(Path(tmp), "p")


@FUZZ
@given(st.one_of(records.map(lambda r: json.dumps(r).encode()), st.binary(max_size=200)))
def test_state_readers_answer_a_record_or_bad_input(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _check_state_readers(Path(tmp), data)


def _check_state_readers(root: Path, data: bytes) -> None:
    _put(root, "profiles/p/last_good.json", data)
    store = StateStore(root)
    try:
        record = store.last_good_to_start("p")
    except BadInput:
        record = None
    if record is not None:
        Candidate.from_record(record)  # a record that passed the check always starts
    (root / "profiles/p/status.json").write_bytes(data)
    try:
        status: Any = read_status(root / "profiles/p/status.json")
    except BadInput:
        status = None
    assert status is None or isinstance(status["phase"], str)


@FUZZ
@given(st.lists(st.one_of(records.map(lambda r: json.dumps(r).encode()), st.binary(max_size=60)), max_size=8))
def test_history_reader_skips_what_is_corrupt_and_keeps_the_rest(lines: list[bytes]) -> None:
    good = json.dumps({"ts": "t", "event": "promoted", "profile": "p"}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        path = _put(Path(tmp), "history.jsonl", b"\n".join([*lines, good]) + b"\n")
        scan = History(path).scan()
        assert scan.records[-1]["event"] == "promoted"
        assert all(isinstance(r["event"], str) for r in scan.records)
        assert all(isinstance(r.get("profile", ""), str) for r in scan.records)
        assert History(path).scan(profile="p", limit=3).records[-1]["event"] == "promoted"
