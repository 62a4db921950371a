"""Each reload request gets the verdict of the reload that took it, never another's."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest
import structlog
import structlog.testing

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
    assert body == {"id": rid, "verdict": "refused", "exit_code": 4, "detail": refused.detail}
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
    parked = Verdict(Outcome.PARKED, 0, "parked", data={"pids": [7, 8], "port": 8001})
    reload_requests.answer(tmp_path, [rid], parked)
    assert reload_requests.verdict(tmp_path, rid) == parked
    assert reload_requests.take(tmp_path) == []  # a control request is no reload


def test_each_requester_reads_its_reloads_progress_lines_whole_and_in_order(tmp_path: Path) -> None:
    ids = [reload_requests.request(tmp_path), reload_requests.request(tmp_path)]
    taken = reload_requests.take(tmp_path)
    write = reload_requests.ProgressFiles(tmp_path, taken)
    seen: list[dict[str, object]] = []
    with reload_requests.ProgressTail(tmp_path, ids[0], seen.append) as tail:
        write({"event": "phase.starting", "msg": "phase starting"})
        tail.read()
        with (tmp_path / f"{ids[0]}.progress.jsonl").open("a") as half:
            half.write('{"event": "gate.st')  # a line being written: not read yet
        tail.read()
        assert [r["event"] for r in seen] == ["phase.starting"]
        with (tmp_path / f"{ids[0]}.progress.jsonl").open("a") as rest:
            rest.write('art", "msg": "gate 1/2 health"}\n')
        write({"event": "launcher.downtime", "down_s": 1.5})  # just before the verdict
    assert [r["event"] for r in seen] == ["phase.starting", "gate.start", "launcher.downtime"]
    assert not (tmp_path / f"{ids[0]}.progress.jsonl").exists()  # read, then removed
    other = (tmp_path / f"{ids[1]}.progress.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in other] == ["phase.starting", "launcher.downtime"]


def test_a_runaway_progress_stream_is_cut_and_an_unwritable_one_costs_nothing(tmp_path: Path) -> None:
    rid = reload_requests.request(tmp_path)
    write = reload_requests.ProgressFiles(tmp_path, reload_requests.take(tmp_path))
    for _ in range(3000):
        write({"event": "message", "msg": "x" * 500})
    assert (tmp_path / f"{rid}.progress.jsonl").stat().st_size <= reload_requests.PROGRESS_MAX_BYTES
    gone = reload_requests.ProgressFiles(tmp_path / "no-such-dir", ["abc"])
    gone({"event": "message"})  # no error: the reload goes on


def test_the_downtime_travels_with_the_verdict_and_a_garbled_one_is_dropped(tmp_path: Path) -> None:
    rid = reload_requests.request(tmp_path)
    reload_requests.answer(
        tmp_path, reload_requests.take(tmp_path), Verdict(Outcome.PROMOTED, 0, "ok", 12.3456)
    )
    assert reload_requests.verdict(tmp_path, rid) == Verdict(Outcome.PROMOTED, 0, "ok", 12.346)
    for garbled in (-1, True, "12", None):
        body = {"id": rid, "verdict": "promoted", "exit_code": 0, "detail": "ok", "down_s": garbled}
        (tmp_path / f"{rid}.verdict.json").write_text(json.dumps(body))
        found = reload_requests.verdict(tmp_path, rid)
        assert found is not None and found.down_s is None, garbled


def _nobody() -> tuple[int, int] | None:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


@pytest.mark.skipif(os.geteuid() != 0 or _nobody() is None, reason="needs root and a user 'nobody'")
def test_a_root_requester_leaves_the_reloads_dir_to_a_launcher_that_runs_as_its_own_user() -> None:
    """`sudo launch set --apply` beside the unit's `User=vllm-gate`: the launcher (here a process
    forked as `nobody`) must remove the request and answer it in the directory root created."""
    uid, gid = _nobody() or (0, 0)
    base = Path(tempfile.mkdtemp(prefix="reload-owner-", dir="/tmp"))  # pytest's tmp dirs are 0700
    try:
        base.chmod(0o755)
        profile_dir = base / "profiles" / "demo"
        profile_dir.mkdir(parents=True)
        os.chown(profile_dir, uid, gid)  # the state dir is the service user's (StateDirectory=)
        reloads = profile_dir / "reloads"
        for before in ("absent", "left root's by an older launch set"):
            if before != "absent":
                shutil.rmtree(reloads)
                reloads.mkdir()
            rid = reload_requests.request(reloads)
            assert (reloads.stat().st_uid, reloads.stat().st_gid) == (uid, gid), before
            assert _answer_as(uid, gid, reloads) == 0, before
            assert reload_requests.verdict(reloads, rid) == Verdict(Outcome.PROMOTED, 0, "ok"), before
    finally:
        shutil.rmtree(base)


def _answer_as(uid: int, gid: int, reloads: Path) -> int:
    """What the launcher does with requests, in a child process running as `uid`: its exit status."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            reload_requests.answer(reloads, reload_requests.take(reloads), Verdict(Outcome.PROMOTED, 0, "ok"))
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_only_regular_files_are_requests_and_the_rest_is_said(tmp_path: Path) -> None:
    """A directory, a link or a FIFO where a request goes is no request: skipped, left in place and
    said, never followed or opened; the real requests beside them are taken."""
    reloads = tmp_path / "reloads"
    rid = reload_requests.request(reloads)
    (reloads / "dir.request").mkdir()
    (reloads / "link.request").symlink_to(tmp_path / "nowhere")
    os.mkfifo(reloads / "pipe.control")
    (reloads / "garbled.control").write_text("{not json")
    probe = reload_requests.ask(reloads, reload_requests.Action.PARK, 4242)
    with structlog.testing.capture_logs() as logged:
        assert reload_requests.take_control(reloads) == [
            reload_requests.ControlRequest(probe, reload_requests.Action.PARK, 4242)
        ]
        assert reload_requests.take(reloads) == [rid]
    assert {e["event"] for e in logged} == {"reload.request_skipped"}
    assert {e["log_level"] for e in logged} == {"warning"}
    said = "\n".join(e["msg"] for e in logged)
    for name, what in [("dir.request", "a directory"), ("link.request", "a symbolic link"),
                       ("pipe.control", "a FIFO"), ("garbled.control", "not a control request")]:  # fmt: skip
        assert f"{name}: {what}" in said, said
    assert sorted(p.name for p in reloads.iterdir()) == [
        "dir.request",
        "garbled.verdict.json",
        "link.request",
        "pipe.control",
    ]
    assert reload_requests.verdict(reloads, "garbled") == Verdict(Outcome.INVALID, 2, "not a control request")
