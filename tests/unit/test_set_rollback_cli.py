"""`launch set` and `launch rollback` through the real CLI: snapshots, byte-identical round trips,
every bad input refused with nothing written, and reloads of a running launcher (a real process)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from launcher.profile.plan import build_plan
from launcher.supervisor.history import utc_now
from tests.conftest import REPO, tree_snapshot

STAND_IN = Path(__file__).with_name("launcher_stand_in.py")
READY_TIMEOUT_S = 30.0

ODD_PROFILE = (
    "# odd layout, kept byte for byte\r\n"
    'extends="base"\r\n'
    "\r\n"
    "[engine]\r\n"
    '  model   =   "/models/odd.gguf"   # indented, aligned\r\n'
    "port=8123#tight comment\r\n"
    "\r\n"
    "[args]\r\n"
    "max_num_seqs=32\r\n"
    "compilation_config={cudagraph_capture_sizes=[1,2,4,8]}   # no spaces inside\r\n"
    "\r\n"
    "\r\n"
    "# trailing comment, two blank lines above, no newline at the end"
)


def cli(profiles: Path, state: Path, *args: str) -> Result:
    return CliRunner().invoke(launch, ["--profiles-dir", str(profiles), "--state-dir", str(state), *args])


def assert_refused(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.output.lstrip().startswith("error:")
    for fragment in fragments:
        assert fragment in result.output, result.output


# ---- set --------------------------------------------------------------------------------------


def test_set_keeps_a_byte_identical_bak_and_edits_the_profile(
    shipped_profiles: Path, state_dir: Path
) -> None:
    original = (shipped_profiles / "prod.toml").read_bytes()
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "prod",
        "max_num_seqs=16",
        "compilation_config.cudagraph_capture_sizes=[1,2,4]",
        "--tag",
        "seqs16",
    )
    assert result.exit_code == 0, result.output
    assert (shipped_profiles / "prod.toml.bak_seqs16").read_bytes() == original
    plan = build_plan(shipped_profiles, "prod")
    assert plan.errors == () and plan.args["max_num_seqs"] == 16
    assert '{"cudagraph_capture_sizes":[1,2,4]}' in plan.argv
    assert "+ --max-num-seqs 16" in result.output and "- --max-num-seqs 32" in result.output
    assert "launch rollback seqs16 --profile prod" in result.output
    assert "no launcher is running" not in result.output  # that is --apply's message
    text = (shipped_profiles / "prod.toml").read_text()
    assert "# 8 → 32: c32 total 227 → 619 tok/s" in text  # the comments stay
    assert [p.name for p in state_dir.rglob("*") if p.is_file()] == ["change.lock"]  # set holds it


def test_a_parent_key_is_written_into_the_child_never_the_parent(
    shipped_profiles: Path, state_dir: Path
) -> None:
    base = (shipped_profiles / "base.toml").read_bytes()
    result = cli(shipped_profiles, state_dir, "set", "spark", "tool_call_parser=hermez", "--tag", "parser")
    assert result.exit_code == 0, result.output
    assert (shipped_profiles / "base.toml").read_bytes() == base
    assert (
        tomllib.loads((shipped_profiles / "spark.toml").read_text())["args"]["tool_call_parser"] == "hermez"
    )
    assert '"hermes" (from base.toml) → "hermez"' in result.output
    argv = build_plan(shipped_profiles, "spark").argv
    assert argv[argv.index("--tool-call-parser") + 1] == "hermez"


def test_dry_run_shows_the_diff_and_writes_nothing(shipped_profiles: Path, state_dir: Path) -> None:
    before = tree_snapshot(shipped_profiles)
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "prod",
        "max_num_seqs=16",
        'env.VLLM_SM70_QWEN_GDN_FULL_FORWARD="1"',
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    assert tree_snapshot(shipped_profiles) == before and not state_dir.exists()
    assert "--- " in result.output and "+++ " in result.output
    assert "-max_num_seqs = 32                          # 8 → 32" in result.output
    assert "+max_num_seqs = 16                          # 8 → 32" in result.output
    assert "+ env VLLM_SM70_QWEN_GDN_FULL_FORWARD 1" in result.output
    assert "nothing was written" in result.output


def test_set_then_rollback_round_trips_byte_identically(shipped_profiles: Path, state_dir: Path) -> None:
    odd = shipped_profiles / "odd.toml"
    odd.write_bytes(ODD_PROFILE.encode())
    odd.chmod(0o640)
    assert build_plan(shipped_profiles, "odd").errors == ()
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "odd",
        "max_num_seqs=8",
        "engine.port=8124",
        "enable_prefix_caching=true",
        'env.X="1"',
        "--tag",
        "t1",
    )
    assert result.exit_code == 0, result.output
    edited = odd.read_bytes()
    assert edited != ODD_PROFILE.encode() and b"port=8124#tight comment\r\n" in edited
    assert b"compilation_config={cudagraph_capture_sizes=[1,2,4,8]}   # no spaces inside\r\n" in edited
    result = cli(shipped_profiles, state_dir, "rollback", "t1", "--profile", "odd")
    assert result.exit_code == 0, result.output
    assert odd.read_bytes() == ODD_PROFILE.encode() and (odd.stat().st_mode & 0o777) == 0o640
    replaced = list(shipped_profiles.glob("odd.toml.replaced-*"))
    assert len(replaced) == 1 and replaced[0].read_bytes() == edited  # nothing is lost
    assert "no launcher is running profile 'odd'" in result.output


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["prod", "max_num_sqs=16", "--tag", "t"],
            ["no flag --max-num-sqs", "did you mean max_num_seqs?", "nothing was written"],
        ),
        (["prod", 'max_num_seqs="16"', "--tag", "t"], ["--max-num-seqs takes an integer"]),
        (["prod", "max_num_seqs=lots", "--tag", "t"], ["'lots'", "--max-num-seqs takes an integer"]),
        (["prod", "engine.prot=8001", "--tag", "t"], ["engine.prot: unknown key; did you mean port?"]),
        (["prod", 'gates.kernel_markr.patterns=["X"]', "--tag", "t"], ["no gate named 'kernel_markr'"]),
        (["prod", "gpu_memory_utilization=1.5", "--tag", "t"], ["must be in (0, 1]"]),
        (["nosuch", "max_num_seqs=16", "--tag", "t"], ["no profile 'nosuch'", "prod"]),
        (["prod", "max_num_seqs=16", "--tag", "../x"], ["invalid tag '../x'"]),
        (["prod", "max_num_seqs=16"], ["--tag is required"]),
        (["prod", "max_num_seqs", "--tag", "t"], ["'max_num_seqs' is not key=value"]),
        (["prod", "max_num_seqs=[1,", "--tag", "t"], ["is not a TOML value"]),
        (
            ["prod", "max_num_seqs.x=1", "--tag", "t"],
            ["args.max_num_seqs is a value in this profile, not a table"],
        ),
        (["prod", "max_num_seqs=16", "--tag", "old"], ["prod.toml.bak_old already exists", "--force-tag"]),
        (
            ["base", "enforce_eager=true", "--tag", "t"],
            ["profile 'prod' (extends 'base')", "enforce_eager", "capture sizes"],
        ),
    ],
)
def test_bad_input_is_refused_and_nothing_changes(
    args: list[str], fragments: list[str], shipped_profiles: Path, state_dir: Path
) -> None:
    (shipped_profiles / "prod.toml.bak_old").write_bytes(b"# an older snapshot\n")
    before = tree_snapshot(shipped_profiles)
    result = cli(shipped_profiles, state_dir, "set", *args)
    assert_refused(result, *fragments)
    assert tree_snapshot(shipped_profiles) == before
    assert not state_dir.exists()


def test_force_tag_replaces_an_existing_snapshot(shipped_profiles: Path, state_dir: Path) -> None:
    (shipped_profiles / "prod.toml.bak_old").write_bytes(b"# an older snapshot\n")
    original = (shipped_profiles / "prod.toml").read_bytes()
    result = cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=16", "--tag", "old", "--force-tag")
    assert result.exit_code == 0, result.output
    assert (shipped_profiles / "prod.toml.bak_old").read_bytes() == original


def test_setting_the_value_it_already_has_writes_nothing(shipped_profiles: Path, state_dir: Path) -> None:
    before = tree_snapshot(shipped_profiles)
    result = cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=32", "--tag", "same")
    assert result.exit_code == 0, result.output
    assert "already has these values; nothing was written" in result.output
    assert tree_snapshot(shipped_profiles) == before


# ---- rollback --------------------------------------------------------------------------------


def test_rollback_of_a_missing_tag_lists_the_tags_there_are(shipped_profiles: Path, state_dir: Path) -> None:
    for tag in ("gdn_off", "seqs16"):
        (shipped_profiles / f"prod.toml.bak_{tag}").write_bytes((shipped_profiles / "prod.toml").read_bytes())
    before = tree_snapshot(shipped_profiles)
    result = cli(shipped_profiles, state_dir, "rollback", "gdn", "--profile", "prod")
    assert_refused(result, "no snapshot", "prod.toml.bak_gdn", "gdn_off", "seqs16")
    result = cli(shipped_profiles, state_dir, "rollback", "x", "--profile", "spark")
    assert_refused(result, "'spark' has no .bak_<tag> snapshot")
    assert tree_snapshot(shipped_profiles) == before


def test_rollback_refuses_a_snapshot_that_does_not_render(shipped_profiles: Path, state_dir: Path) -> None:
    broken = (shipped_profiles / "prod.toml").read_text().replace("max_num_seqs", "max_num_sqs")
    (shipped_profiles / "prod.toml.bak_bad").write_text(broken)
    before = tree_snapshot(shipped_profiles)
    result = cli(shipped_profiles, state_dir, "rollback", "bad", "--profile", "prod")
    assert_refused(
        result, "prod.toml.bak_bad does not render", "prod.toml.bak_bad: args.max_num_sqs", "did you mean"
    )
    assert tree_snapshot(shipped_profiles) == before


def test_rollback_list_says_when_what_changes_and_what_serves(
    shipped_profiles: Path, state_dir: Path
) -> None:
    assert (
        cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=16", "--tag", "seqs16").exit_code == 0
    )
    served = build_plan(shipped_profiles, "prod").fingerprint()  # the file as `seqs8` will keep it
    assert cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=8", "--tag", "seqs8").exit_code == 0
    os.utime(shipped_profiles / "prod.toml.bak_seqs16", (1_780_000_000, 1_780_000_000))  # the older one
    (shipped_profiles / "prod.toml.bak_broken").write_text("[args\n")
    (state_dir / "profiles" / "prod").mkdir(parents=True, exist_ok=True)
    (state_dir / "profiles" / "prod" / "status.json").write_text(json.dumps(
        {"phase": "serving", "profile": "prod", "launcher_pid": 0, "serving_fingerprint": served}
    ))  # fmt: skip
    before = tree_snapshot(shipped_profiles)
    result = cli(shipped_profiles, state_dir, "rollback", "--list", "--profile", "prod")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    tags = [line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("      ")]
    assert tags == ["broken", "seqs8", "seqs16"]  # newest first
    seqs8 = next(i for i, line in enumerate(lines) if line.startswith("  seqs8 "))
    assert f"prod@{served}  ← serves now" in lines[seqs8] and "saved 20" in lines[seqs8]
    assert lines[seqs8 + 1].strip() == "--max-num-seqs: 8 → 16"  # what rolling back to it changes
    seqs16 = next(line for line in lines if line.startswith("  seqs16 "))
    assert "saved 2026-05-28" in seqs16 and "serves now" not in seqs16
    assert "does not render" in next(line for line in lines if line.startswith("  broken "))
    assert lines[-2].startswith(f"serving: prod@{served} (serving); the file now (prod.toml) renders prod@")
    assert lines[-1].startswith("pruned so far: none")
    assert tree_snapshot(shipped_profiles) == before  # a list writes nothing
    assert_refused(cli(shipped_profiles, state_dir, "rollback", "seqs8", "--list", "--profile", "prod"),
                   "a TAG to restore, or --list")  # fmt: skip
    assert_refused(cli(shipped_profiles, state_dir, "rollback", "--profile", "prod"), "a TAG to restore")


def test_rollback_keeps_only_the_newest_replaced_copies(shipped_profiles: Path, state_dir: Path) -> None:
    """One `.replaced-<UTC>` per rollback piled up; `set` and `rollback` keep the newest KEPT, by the
    time in their names, and touch nothing that is not such a copy (a link, an operator's own file)."""
    from launcher.profile.snapshots import KEPT

    old = [f"prod.toml.replaced-202601{day:02d}T000000Z" for day in range(1, 25)] + [
        "prod.toml.replaced-20260124T000000Z-2"
    ]
    for name in old:
        (shipped_profiles / name).write_text(name)
    (shipped_profiles / "prod.toml.replaced-notes").write_text("an operator's own file")
    (shipped_profiles / "prod.toml.replaced-20250101T000000Z.link").symlink_to(shipped_profiles / "prod.toml")
    (shipped_profiles / "prod.toml.bak_keep").write_bytes((shipped_profiles / "prod.toml").read_bytes())
    set_result = cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=8", "--tag", "t")
    assert set_result.exit_code == 0, set_result.output
    assert "pruned  prod.toml.replaced-20260101T000000Z, " in set_result.output  # 25 → KEPT
    result = cli(shipped_profiles, state_dir, "rollback", "t", "--profile", "prod")
    assert result.exit_code == 0, result.output
    copies = sorted(p.name for p in shipped_profiles.glob("prod.toml.replaced-2*") if not p.is_symlink())
    assert len(copies) == KEPT and "pruned  prod.toml.replaced-20260106T000000Z  (" in result.output
    assert copies[0] == "prod.toml.replaced-20260107T000000Z"
    assert "prod.toml.replaced-20260124T000000Z-2" in copies
    assert any(name.startswith("prod.toml.replaced-2026") and name not in old for name in copies)  # this one
    assert (shipped_profiles / "prod.toml.replaced-notes").exists()
    assert (shipped_profiles / "prod.toml.replaced-20250101T000000Z.link").is_symlink()
    assert (shipped_profiles / "prod.toml.bak_keep").exists() and (
        shipped_profiles / "prod.toml.bak_t"
    ).exists()


def test_rollback_without_a_profile_needs_exactly_one_running_launcher(
    shipped_profiles: Path, state_dir: Path
) -> None:
    result = cli(shipped_profiles, state_dir, "rollback", "t")
    assert_refused(result, "no launcher is running", "--profile NAME")
    stale = state_dir / "profiles" / "prod"
    stale.mkdir(parents=True)
    (stale / "launcher.json").write_text(
        json.dumps({"pid": dead_pid(), "started_at": "2026-09-17T10:15:00.000000Z"})
    )
    assert_refused(cli(shipped_profiles, state_dir, "rollback", "t"), "no launcher is running")


# ---- with a running launcher -----------------------------------------------------------------


class StandIn:
    """A launcher stand-in process (tests/unit/launcher_stand_in.py) for one profile."""

    def __init__(self, state: Path, profiles: Path, profile: str) -> None:
        self.state, self.profile = state, profile
        self.proc = subprocess.Popen(
            [sys.executable, str(STAND_IN), str(state), str(profiles), profile],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        assert ready and self.proc.stdout.readline().strip() == "ready", "the stand-in did not start"

    def reloads(self) -> list[dict[str, object]]:
        path = self.state / "profiles" / self.profile / "reloads.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=10) is not None


@pytest.fixture
def stand_ins(shipped_profiles: Path, state_dir: Path) -> Iterator[list[StandIn]]:
    started: list[StandIn] = []
    yield started
    for stand_in in started:
        stand_in.stop()


def test_apply_reloads_the_running_launcher_and_returns_its_verdict(
    shipped_profiles: Path, state_dir: Path, stand_ins: list[StandIn]
) -> None:
    stand_ins.append(StandIn(state_dir, shipped_profiles, "prod"))
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "prod",
        "max_num_seqs=16",
        "--tag",
        "a",
        "--apply",
        "--timeout-s",
        "30",
    )
    assert result.exit_code == 0, result.output
    assert "reloaded: the launcher serves the profile" in result.output
    reloads = stand_ins[0].reloads()
    assert len(reloads) == 1 and "16" in reloads[0]["argv"]  # type: ignore[operator]
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "prod",
        "max_num_seqs=24",
        "--tag",
        "b",
        "--apply",
        "--timeout-s",
        "30",
    )
    assert result.exit_code == 3, result.output
    assert "rolled back" in result.output and "max_num_seqs=24" in result.output
    # rollback with no --profile finds the one launcher, restores and reloads it
    result = cli(shipped_profiles, state_dir, "rollback", "b", "--timeout-s", "30")
    assert result.exit_code == 0, result.output
    assert "restored" in result.output and len(stand_ins[0].reloads()) == 3
    assert build_plan(shipped_profiles, "prod").args["max_num_seqs"] == 16


def test_set_without_apply_tells_that_the_launcher_still_serves_the_old_profile(
    shipped_profiles: Path, state_dir: Path, stand_ins: list[StandIn]
) -> None:
    stand_ins.append(StandIn(state_dir, shipped_profiles, "prod"))
    result = cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=16", "--tag", "a")
    assert result.exit_code == 0, result.output
    assert f"launcher pid {stand_ins[0].proc.pid} still serves the previous 'prod'" in result.output
    assert stand_ins[0].reloads() == []


def test_a_failed_reload_exits_1_and_several_launchers_need_a_profile_name(
    shipped_profiles: Path, state_dir: Path, stand_ins: list[StandIn]
) -> None:
    stand_ins.append(StandIn(state_dir, shipped_profiles, "prod"))
    stand_ins.append(StandIn(state_dir, shipped_profiles, "fable-27b"))
    result = cli(
        shipped_profiles,
        state_dir,
        "set",
        "prod",
        "max_num_seqs=13",
        "--tag",
        "a",
        "--apply",
        "--timeout-s",
        "30",
    )
    assert result.exit_code == 1, result.output
    assert "the reload failed" in result.output
    assert stand_ins[0].proc.wait(timeout=10) == 1
    (shipped_profiles / "fable-27b.toml.bak_x").write_bytes(
        (shipped_profiles / "fable-27b.toml").read_bytes()
    )
    assert "fable-27b" in cli(shipped_profiles, state_dir, "rollback", "x").output  # prod's launcher is gone
    stand_ins.append(StandIn(state_dir, shipped_profiles, "prod"))
    assert_refused(
        cli(shipped_profiles, state_dir, "rollback", "x"), "several launchers are running", "--profile"
    )


def test_the_installed_launch_command_round_trips(shipped_profiles: Path, state_dir: Path) -> None:
    """The console script itself, as the operator runs it."""
    exe = Path(sys.executable).with_name("launch")
    env = {**os.environ, "VLLM_GATE_PROFILES": str(shipped_profiles), "VLLM_GATE_STATE": str(state_dir)}
    original = (shipped_profiles / "fable-27b.toml").read_bytes()
    run = subprocess.run(
        [exe, "set", "fable-27b", "speculative_config.num_speculative_tokens=2", "--tag", "mtp2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    text = (shipped_profiles / "fable-27b.toml").read_text()
    assert 'speculative_config = { method = "mtp", num_speculative_tokens = 2 }' in text
    run = subprocess.run(
        [exe, "rollback", "mtp2", "--profile", "fable-27b"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert (shipped_profiles / "fable-27b.toml").read_bytes() == original


def dead_pid() -> int:
    """A pid that is not running: a child that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=10)
    return child.pid


@pytest.mark.parametrize(
    ("program", "timeout_s", "says"),
    [
        (  # the deadline is what this case proves: it can only come later on a busy host, never early
            "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
            "0.5",
            "gave no verdict within 0.5 s",
        ),
        (  # the death ends the wait: a deadline that is never reached, however busy the host
            # SIGHUP's default action, whatever the suite inherited (under nohup it is ignored)
            "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
            "print('ready', flush=True); time.sleep(600)",
            "300",
            "exited during the reload",
        ),
    ],
)
def test_a_launcher_that_gives_no_verdict_is_a_failure_not_a_hang(
    program: str, timeout_s: str, says: str, shipped_profiles: Path, state_dir: Path
) -> None:
    """One ignores SIGHUP (the wait times out), one dies of it (the wait sees it go)."""
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        info = state_dir / "profiles" / "prod" / "launcher.json"
        info.parent.mkdir(parents=True)
        info.write_text(json.dumps({"pid": proc.pid, "started_at": utc_now()}))
        result = cli(
            shipped_profiles,
            state_dir,
            "set",
            "prod",
            "max_num_seqs=16",
            "--tag",
            "a",
            "--apply",
            "--timeout-s",
            timeout_s,
        )
        assert result.exit_code == 1, result.output
        assert says in result.output and "Traceback" not in result.output
    finally:
        proc.kill()
        proc.wait(timeout=10)
