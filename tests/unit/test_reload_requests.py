"""Each reload request gets the verdict of the reload that took it, never another's."""

from __future__ import annotations

from pathlib import Path

from launcher.state.store import StateStore
from launcher.supervisor import reload_requests
from launcher.supervisor.reload_requests import Verdict


def test_a_request_made_during_a_reload_waits_for_the_next_one(tmp_path: Path) -> None:
    first = reload_requests.request(tmp_path)
    taken = reload_requests.take(tmp_path)
    second = reload_requests.request(tmp_path)  # arrives while the first reload runs
    reload_requests.answer(tmp_path, taken, Verdict(3, "rolled back: gate x"))
    assert reload_requests.verdict(tmp_path, second) is None
    assert reload_requests.verdict(tmp_path, first) == Verdict(3, "rolled back: gate x")
    assert reload_requests.verdict(tmp_path, first) is None  # read once, then removed
    reload_requests.answer(tmp_path, reload_requests.take(tmp_path), Verdict(0, "already serving ab12"))
    assert reload_requests.verdict(tmp_path, second) == Verdict(0, "already serving ab12")


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
