"""A refused reload tells everyone why (issue 42): `systemctl reload` of a bad hand edit used to leave
only `reload requested` in the journal, `status.json` unchanged and no metric moved. Now every
refusal — a profile that does not render, preflight or the restart guard before the stop, or
preflight at the start beside production — is one `reload_refused` record, counted with its last
reason in `status.json`, a warning line with the reason, and systemd hears READY=1 only with the
verdict, after RELOADING=1 (the rig's `Notices` records what sd_notify was sent, in order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.supervisor import reload_requests
from launcher.supervisor.history import Event
from launcher.supervisor.reload_requests import Outcome, Verdict
from tests.engine_double import Script, passes, rejected_by
from tests.supervisor_rig import PORT, Rig

BESIDE = {"trial": "beside", "park_port": PORT + 1}


def serving_rig(tmp_path: Path, **supervisor: object) -> Rig:
    rig = Rig(tmp_path, passes(), passes(), supervisor=dict(supervisor), frontdoor={"port": 9000})
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    return rig


def reload(rig: Rig) -> Verdict:
    rid = reload_requests.request(rig.store.reloads_dir("svc"))
    rig.reloader.reload()
    found = reload_requests.verdict(rig.store.reloads_dir("svc"), rid)
    assert found is not None
    return found


def after_reloading(rig: Rig) -> list[tuple[str, str]]:
    calls = rig.notices.calls
    return [c for c in calls[calls.index(("reloading", "")) :] if c[0] in ("reloading", "ready")]


def test_a_bad_hand_edit_is_refused_counted_and_said_with_its_reason(tmp_path: Path) -> None:
    rig = serving_rig(tmp_path)
    serving = rig.state.serving
    (rig.profiles / "svc.toml").write_text(
        (rig.profiles / "svc.toml").read_text().replace("max_num_seqs = 4", "max_num_seqs = 'four'")
    )
    verdict = reload(rig)
    assert (verdict.outcome, verdict.exit_code) == (Outcome.INVALID, 2)
    assert "max_num_seqs" in verdict.detail and verdict.detail.endswith("; still serving")
    assert rig.state.serving is serving and rig.events()[-1] == Event.RELOAD_REFUSED
    assert after_reloading(rig) == [("reloading", ""), ("ready", verdict.detail)]  # READY=1 with the verdict
    status = rig.status()
    assert status["detail"] == verdict.detail and status["reload_refused"] == 1
    assert status["last_reload_refusal"]["reason"] == verdict.detail and status["last_reload_refusal"]["at"]
    assert verdict.detail in rig.terminal.getvalue()  # the journal's line says why, not only "requested"
    second = reload(rig)
    assert (
        rig.status()["reload_refused"] == 2 and rig.status()["last_reload_refusal"]["reason"] == second.detail
    )


def test_a_start_beside_production_refused_after_the_checks_tells_systemd_the_verdict(tmp_path: Path) -> None:
    rig = serving_rig(tmp_path, **BESIDE)
    serving = rig.state.serving
    assert serving is not None
    change = rig.candidate(max_num_seqs=8)
    rig.preflight.refuse_at_start[change.fingerprint] = "port: 127.0.0.1:18124 is in use by pid 4242 nc"
    verdict = reload(rig)
    assert (verdict.outcome, verdict.exit_code) == (Outcome.REFUSED, 4)
    assert "18124 is in use by pid 4242" in verdict.detail
    assert rig.state.serving is serving and rig.engines.started == [serving.engine]  # nothing started
    assert after_reloading(rig) == [("reloading", ""), ("ready", verdict.detail)]  # not left "reloading"
    assert rig.events().count(Event.RELOAD_REFUSED) == 1 and rig.status()["reload_refused"] == 1
    assert Event.REJECTED not in rig.events() and not rig.store.rejected("svc")


@pytest.mark.parametrize(
    ("second", "supervisor", "outcome"),
    [
        (passes(), {}, Outcome.PROMOTED),
        (
            rejected_by("tool_call", "auto: no tool call"),
            {"park": "sleep", "park_port": PORT + 1},
            Outcome.ROLLED_BACK,
        ),
    ],
)
def test_systemd_hears_ready_once_and_only_with_the_verdict(
    tmp_path: Path, second: Script, supervisor: dict[str, object], outcome: Outcome
) -> None:
    """Whatever the reload does meanwhile (park, start, gates, wake), READY=1 comes once, last."""
    rig = Rig(tmp_path, passes(), second, supervisor=supervisor, frontdoor={"port": 9000})
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    rig.candidate(max_num_seqs=8)
    verdict = reload(rig)
    assert verdict.outcome is outcome
    said = after_reloading(rig)
    assert said[0] == ("reloading", "") and [kind for kind, _ in said] == ["reloading", "ready"], said
