"""What `park = "sleep"` costs, shown by the dry run so an operator sees when `stop` is cheaper: the
first sleep's pinning from the weights the last start loaded (2.7 s for 5.29 GiB measured on vLLM
0.26.0, vllm-facts.md §12), later sleeps and a wake, and the start a `stop` would repeat."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from launcher.cli import launch
from launcher.profile.keys import SupervisorSettings
from launcher.supervisor.sleep import PIN_S_PER_GIB, SLEEP_S, WAKE_S, park_costs

SLEEP = SupervisorSettings.read({"park": "sleep", "park_port": 8001})


def test_the_first_sleep_is_estimated_from_the_weights_the_last_start_loaded() -> None:
    costs = park_costs(SLEEP, {"weights_gib": 5.29, "startup_seconds": 47.6})
    assert costs is not None
    assert costs["first_sleep_s"] == 2.7 == round(SLEEP_S + PIN_S_PER_GIB * 5.29, 1)  # the measured figure
    assert (costs["last_start_s"], costs["later_sleep_s"], costs["wake_s"]) == (47.6, SLEEP_S, WAKE_S)
    tiny = park_costs(SLEEP, {"weights_gib": 0.0})
    assert tiny is not None and tiny["first_sleep_s"] == round(SLEEP_S, 1)  # nothing to pin


def test_without_a_start_on_record_the_estimate_says_it_does_not_know() -> None:
    for facts in (None, {}, {"weights_gib": True}, {"weights_gib": "5 GiB"}):
        costs = park_costs(SLEEP, facts)
        assert costs is not None and costs["first_sleep_s"] is None and costs["weights_gib"] is None


def test_a_profile_that_stops_has_no_park_costs() -> None:
    assert park_costs(SupervisorSettings.read({}), {"weights_gib": 5.0}) is None


def test_the_dry_run_shows_them_in_words_and_in_json(tmp_path: Path) -> None:
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    (profiles / "p.toml").write_text(
        '[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "m"\nport = 8000\n'
        '[supervisor]\npark = "sleep"\npark_port = 8001\n',
        encoding="utf-8",
    )
    (state / "profiles" / "p").mkdir(parents=True)
    (state / "profiles" / "p" / "last_facts.json").write_text(
        '{"weights_gib": 5.29, "startup_seconds": 47.6}'
    )
    base = ["--profiles-dir", str(profiles), "--state-dir", str(state), "--profile", "p", "--dry-run"]
    shown = CliRunner().invoke(launch, base)
    assert shown.exit_code == 0, shown.output
    assert "first sleep pins host buffers for its weights: about 2.7 s for the 5.3 GiB" in shown.output
    assert "(the last start took 48 s)" in shown.output
    as_json = CliRunner().invoke(launch, [*base, "--json"])
    assert json.loads(as_json.output)["park"]["first_sleep_s"] == 2.7
