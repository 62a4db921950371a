"""The serving state as a record: each change is one method, and a change that would leave two
engines in one role, or take what is not there, is refused rather than silently overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.supervisor.seams import Attempt
from launcher.supervisor.state import ServingState
from tests.engine_double import passes
from tests.supervisor_rig import Rig


def two_attempts(tmp_path: Path) -> tuple[Attempt, Attempt]:
    rig = Rig(tmp_path, passes(), passes())
    first = rig.bringup.spawn(rig.candidate())
    rig.state.take_running()
    second = rig.bringup.spawn(rig.candidate(max_num_seqs=8))
    rig.state.take_running()
    return first, second


def test_a_trial_promoted_serves_and_is_no_trial_any_more(tmp_path: Path) -> None:
    first, _ = two_attempts(tmp_path)
    state = ServingState()
    state.begin_trial(first)
    assert state.newest() is first and state.serving is None
    assert state.promote_trial(last_good=True) is first
    view = state.view()
    assert (view.serving, view.trial, view.on_last_good) == (first, None, True)
    assert view.running == (first,)


def test_two_trials_at_once_are_refused(tmp_path: Path) -> None:
    first, second = two_attempts(tmp_path)
    state = ServingState()
    state.begin_trial(first)
    with pytest.raises(RuntimeError, match="a trial runs already"):
        state.begin_trial(second)


def test_promoting_without_a_trial_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no trial"):
        ServingState().promote_trial(last_good=False)


def test_serving_a_second_engine_over_the_first_is_refused(tmp_path: Path) -> None:
    first, second = two_attempts(tmp_path)
    state = ServingState()
    state.serve(first, last_good=False)
    state.serve(first, last_good=True)  # the same engine again: its role may change
    assert state.on_last_good
    with pytest.raises(RuntimeError, match="serves already"):
        state.serve(second, last_good=False)


def test_taking_what_runs_takes_the_trial_and_what_serves_but_not_the_sleeper(tmp_path: Path) -> None:
    first, second = two_attempts(tmp_path)
    state = ServingState()
    state.serve(first, last_good=False)
    state.park_serving()
    state.serve(second, last_good=False)
    assert state.take_running() == (second,)
    assert state.parked is first and state.serving is None and state.newest() is None
    assert state.take_parked() is first and state.take_parked() is None


def test_parking_needs_something_serving_and_no_sleeper_yet(tmp_path: Path) -> None:
    first, second = two_attempts(tmp_path)
    state = ServingState()
    with pytest.raises(RuntimeError, match="nothing serves"):
        state.park_serving()
    state.serve(first, last_good=False)
    state.park_serving()
    state.serve(second, last_good=False)
    with pytest.raises(RuntimeError, match="parked already"):
        state.park_serving()


def test_a_lend_is_taken_back_once() -> None:
    state = ServingState()
    state.lend(4242)
    assert state.lent_to == 4242 and state.view().lent_to == 4242
    assert state.take_back() == 4242
    assert state.take_back() is None and state.lent_to is None


def test_where_the_proxy_was_pointed_is_part_of_the_record() -> None:
    state = ServingState()
    assert state.view().pointed_at is None
    state.pointed(8001)
    assert state.view().pointed_at == 8001


def test_the_profile_s_launch_serves_again_after_last_good(tmp_path: Path) -> None:
    first, _ = two_attempts(tmp_path)
    state = ServingState()
    state.serve(first, last_good=True)
    state.mark_profile_launch()
    assert not state.on_last_good and state.serving is first
