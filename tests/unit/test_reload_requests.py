"""Each reload request gets the verdict of the reload that took it, never another's."""

from __future__ import annotations

import json
from pathlib import Path

from launcher.state.store import StateStore
from launcher.supervisor import reload_requests
from launcher.supervisor.reload_requests import Outcome, Verdict


def test_a_request_made_during_a_reload_waits_for_the_next_one(tmp_path: Path) -> None:
    first = reload_requests.request(tmp_path)
    taken = reload_requests.take(tmp_path)
    second = reload_requests.request(tmp_path)  # arrives while the first reload runs
    reload_requests.answer(tmp_path, taken, Verdict(Outcome.ROLLED_BACK, 3, "rolled back: gate x"))
    assert reload_requests.verdict(tmp_path, second) is None
    assert reload_requests.verdict(tmp_path, first) == Verdict(Outcome.ROLLED_BACK, 3, "rolled back: gate x")
    assert reload_requests.verdict(tmp_path, first) is None  # read once, then removed
    reload_requests.answer(
        tmp_path, reload_requests.take(tmp_path), Verdict(Outcome.UNCHANGED, 0, "already serving ab12")
    )
    assert reload_requests.verdict(tmp_path, second) == Verdict(Outcome.UNCHANGED, 0, "already serving ab12")


def test_the_outcome_travels_as_a_field_and_an_older_file_reads_by_its_exit_code(tmp_path: Path) -> None:
    refused = Verdict(Outcome.REFUSED, 4, "reload refused: port 8000 is in use; still serving")
    rid = reload_requests.request(tmp_path)
    reload_requests.answer(tmp_path, reload_requests.take(tmp_path), refused)
    body = json.loads((tmp_path / f"{rid}.verdict.json").read_text())
    assert body == {"id": rid, "verdict": "refused", "exit_code": 4, "detail": refused.detail, "data": {}}
    assert reload_requests.verdict(tmp_path, rid) == refused
    for old, outcome in [(0, Outcome.PROMOTED), (2, Outcome.INVALID), (3, Outcome.ROLLED_BACK),
                         (4, Outcome.REFUSED), (1, Outcome.FAILED), (5, Outcome.FAILED)]:  # fmt: skip
        rid = reload_requests.request(tmp_path)
        (tmp_path / f"{rid}.verdict.json").write_text(json.dumps({"id": rid, "exit_code": old}))
        assert reload_requests.verdict(tmp_path, rid) == Verdict(outcome, old, "")
    rid = reload_requests.request(tmp_path)  # a newer launcher's outcome: what its exit code implies
    body = {"id": rid, "verdict": "postponed", "exit_code": 3, "detail": "d"}
    (tmp_path / f"{rid}.verdict.json").write_text(json.dumps(body))
    assert reload_requests.verdict(tmp_path, rid) == Verdict(Outcome.ROLLED_BACK, 3, "d")


def test_a_garbled_verdict_file_is_no_verdict(tmp_path: Path) -> None:
    reloads = StateStore(tmp_path).reloads_dir("prod")
    rid = reload_requests.request(reloads)
    (tmp_path / "profiles" / "prod" / "reloads" / f"{rid}.verdict.json").write_text("{not json")
    assert reload_requests.verdict(reloads, rid) is None


def test_a_launcher_gone_mid_reload_is_reported_with_the_cause_it_left(tmp_path: Path) -> None:
    from launcher.supervisor.control import last_words

    profile_dir = tmp_path / "profiles" / "prod"
    profile_dir.mkdir(parents=True)
    assert last_words(tmp_path, "prod") == "last phase None; it recorded no cause"
    (profile_dir / "status.json").write_text(
        '{"phase": "failed", "rollback_reason": "last-good prod@ab12 rejected by health: 503"}'
    )
    assert last_words(tmp_path, "prod") == "last phase failed: last-good prod@ab12 rejected by health: 503"


def test_control_requests_travel_by_id_with_their_data_and_a_garbled_one_is_never_acted_on(
    tmp_path: Path,
) -> None:
    rid = reload_requests.ask(tmp_path, reload_requests.Action.PARK, 4242)
    (tmp_path / "bad.control").write_text('{"action": "reboot", "requester": 1}')
    (tmp_path / "huge.control").write_text('{"action": "park", "requester": 1, "x": "' + "y" * 10_000 + '"}')
    taken = reload_requests.take_control(tmp_path)
    assert taken == [reload_requests.ControlRequest(rid, reload_requests.Action.PARK, 4242)]
    assert reload_requests.verdict(tmp_path, "bad") == Verdict(Outcome.INVALID, 2, "not a control request")
    assert reload_requests.verdict(tmp_path, "huge") == Verdict(Outcome.INVALID, 2, "not a control request")
    parked = Verdict(Outcome.PARKED, 0, "parked", {"pids": [7, 8], "port": 8001})
    reload_requests.answer(tmp_path, [rid], parked)
    assert reload_requests.verdict(tmp_path, rid) == parked
    assert reload_requests.take(tmp_path) == []  # a control request is no reload
