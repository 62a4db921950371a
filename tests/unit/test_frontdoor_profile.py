"""`[frontdoor]` in a profile: every bad value refused with the file and key named (the dry run
shows it; `launch --profile`, `launch frontdoor` and `install-unit` exit 2 with nothing changed), and
the dry run shows a good door: its URL and where it points."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from tests.conftest import tree_snapshot

DEMO_PORT = 8765  # profiles/demo.toml's engine.port


@pytest.fixture
def state() -> Iterator[Path]:
    """A short state dir: the door's admin socket goes in it (a unix socket path holds 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="vg-fd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def profile(profiles: Path, door: str, supervisor: str = "", engine: str = "") -> None:
    (profiles / "door.toml").write_text(
        f'extends = "demo"\n[engine]\n{engine}\n[supervisor]\n{supervisor}\n[frontdoor]\n{door}\n',
        encoding="utf-8",
    )


def run(profiles: Path, state: Path, *args: str) -> Result:
    return CliRunner().invoke(launch, ["--profiles-dir", str(profiles), "--state-dir", str(state), *args])


@pytest.mark.parametrize(
    ("door", "supervisor", "error"),
    [
        ('port = "9000"', "", "frontdoor.port = '9000': expected int"),
        ("port = 0", "", "frontdoor.port = 0: must be ≥ 1"),
        ("port = 70000", "", "frontdoor.port = 70000: must be ≤ 65_535"),
        ("hold_s = 60", "", "frontdoor.port is missing: the clients' port"),
        ("port = 9000\nhold_s = -1", "", "frontdoor.hold_s = -1: must be ≥ 0"),
        ("port = 9000\nhold_s = inf", "", "frontdoor.hold_s = inf: must be a finite number"),
        ("port = 9000\nretry_after_s = 1.5", "", "frontdoor.retry_after_s = 1.5: expected int"),
        ("port = 9000\ndrain_timeout_s = 4000", "", "frontdoor.drain_timeout_s = 4000: must be ≤ 3_600"),
        ("port = 9000\nhold = 5", "", "frontdoor.hold: unknown key; did you mean hold_s?"),
        ('port = 9000\nhost = "door.example.com"', "", "frontdoor.host = 'door.example.com': an IP address"),
        ('port = 9000\nadmin = "0.0.0.0:2019"', "", "frontdoor.admin = '0.0.0.0:2019': an absolute"),
        ('port = 9000\nadmin = "/run/x.sock|0666"', "", "frontdoor.admin = '/run/x.sock|0666': contains |"),
        ('port = 9000\nadmin = "127.0.0.1:9000"', "", "'127.0.0.1:9000': its port is frontdoor.port"),
        ('port = 9000\nadmin = "localhost:8765"', "", "'localhost:8765': its port is engine.port"),
        (f"port = {DEMO_PORT}", "", f"frontdoor.port = {DEMO_PORT} is engine.port"),
        ("port = 8766", 'park = "sleep"\npark_port = 8766', "frontdoor.port = 8766 is supervisor.park_port"),
    ],
)  # fmt: skip
def test_a_bad_frontdoor_value_is_an_error_of_the_dry_run_and_the_start_exits_2_changing_nothing(
    shipped_profiles: Path, state: Path, door: str, supervisor: str, error: str
) -> None:
    profile(shipped_profiles, door, supervisor)
    dry = run(shipped_profiles, state, "--profile", "door", "--dry-run")
    assert dry.exit_code == 2, dry.output
    assert any(error in line for line in dry.output.splitlines() if line.startswith("error: ")), dry.output
    before = tree_snapshot(state)
    door_start = ["frontdoor", "--profile", "door"]
    for words in (["--profile", "door"], door_start, [*door_start, "--dry-run"]):
        started = run(shipped_profiles, state, *words)
        assert started.exit_code == 2 and error in started.output, (words, started.output)
        assert "Traceback" not in started.output
    assert tree_snapshot(state) == before == {}


def test_a_good_door_in_the_dry_run_its_url_and_where_it_points(shipped_profiles: Path, state: Path) -> None:
    profile(
        shipped_profiles, 'port = 9000\nhost = "0.0.0.0"\nhold_s = 30', 'park = "sleep"\npark_port = 8766'
    )
    dry = run(shipped_profiles, state, "--profile", "door", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert (
        "front door: http://127.0.0.1:9000 → 127.0.0.1:8765 (engine.port: the profile has not run yet)"
        in dry.output
    )
    assert "engines 127.0.0.1:8765, 127.0.0.1:8766" in dry.output and "waits up to 30 s" in dry.output
    shown = json.loads(run(shipped_profiles, state, "--profile", "door", "--dry-run", "--json").output)
    assert shown["frontdoor"]["url"] == "http://127.0.0.1:9000"
    assert (shown["frontdoor"]["points_at"], shown["frontdoor"]["hold_s"]) == ("127.0.0.1:8765", 30)
    assert tree_snapshot(state) == {}


def test_a_profile_without_a_door_shows_none_and_launch_frontdoor_says_how_to_add_one(
    shipped_profiles: Path, state: Path
) -> None:
    assert (
        json.loads(run(shipped_profiles, state, "--profile", "demo", "--dry-run", "--json").output)[
            "frontdoor"
        ]
        is None
    )
    result = run(shipped_profiles, state, "frontdoor", "--profile", "demo")
    assert (
        result.exit_code == 2
        and "has no front door" in result.output
        and "hint: add `[frontdoor]`" in result.output
    )
    assert (
        run(shipped_profiles, state, "frontdoor", "--profile", "base").exit_code == 2
    )  # abstract: none either
    assert tree_snapshot(state) == {}


def test_an_engine_clients_can_reach_around_the_door_is_a_warning(
    shipped_profiles: Path, state: Path
) -> None:
    profile(shipped_profiles, "port = 9000", engine='host = "0.0.0.0"')
    dry = run(shipped_profiles, state, "--profile", "door", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "engine.host = '0.0.0.0' lets clients reach the engine around the front door" in dry.output


def test_launch_frontdoor_dry_run_prints_the_config_and_starts_nothing(
    shipped_profiles: Path, state: Path
) -> None:
    profile(shipped_profiles, "port = 9000")
    result = CliRunner().invoke(launch, ["--profiles-dir", str(shipped_profiles), "--state-dir", str(state),
                                         "--profile", "door", "frontdoor", "--dry-run"])  # fmt: skip
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)  # the config alone on stdout: `| jq` works
    assert config["apps"]["http"]["servers"]["frontdoor"]["listen"] == ["127.0.0.1:9000"]
    assert "front door of door: clients http://127.0.0.1:9000 → 127.0.0.1:8765" in result.stderr
    assert "dry run: nothing was started" in result.stderr
    assert tree_snapshot(state) == {}


def test_launch_frontdoor_help_teaches() -> None:
    text = CliRunner().invoke(launch, ["frontdoor", "--help"]).output
    for words in (
        "[frontdoor] port",
        "hold_s",
        "Retry-After",
        "--dry-run",
        "vllm-gate-frontdoor@prod",
        "exec",
    ):
        assert words in text, words
