"""`launch probe` end to end against real launchers and `vllm-sim`: the arms are measured, and
production comes back after success, a rejected arm, an error, SIGINT/SIGTERM and SIGKILL."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from launcher.errors import GateError
from launcher.probe.arms import build_arms, parse_arm_specs
from launcher.probe.handover import Handover, Systemctl
from launcher.probe.measure import Measurement
from launcher.probe.presets import bench_options
from launcher.probe.production import Mode, Production, discover, unit_instance
from launcher.probe.results import ArmOutcome, Settings
from launcher.probe.session import ProbeSession
from launcher.settings import GlobalOptions
from launcher.supervisor.wiring import host_hooks
from tests.integration.probe_support import PROFILE, TINY_BENCH, Box, alive, group_alive
from tests.launcher_run import LAUNCH

pytestmark = pytest.mark.integration


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    made = Box(tmp_path)
    made.write_prod()
    yield made
    left = made.leftovers()
    assert left == [], f"processes were left behind: {left}"


def test_two_arm_probe_measures_the_slow_arm_and_restores_production(box: Box, tmp_path: Path) -> None:
    """The slow arm is measured and compared with production's runs; that its 2.5x slower steps
    come out `worse` by more than 40 % is a figure (bench/bench_figures.py `probe`), and the verdict
    rule on given numbers is tests/unit/test_probe_compare.py's."""
    before = (box.profiles / "prod.toml").read_bytes()
    first = box.start_production()
    out = tmp_path / "out"
    arms = ["--arm", "slow:sim_slow_decode=2.5", "--arm", "badtools:sim_tool_fault=malformed"]
    done = box.launch(
        "probe", "--profile", PROFILE, *arms, *TINY_BENCH, "--out", str(out), "--no-plots", timeout_s=600
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = done.stdout
    data = json.loads((out / "probe.json").read_text())
    prod, slow, bad = data["arms"]
    assert [a["outcome"] for a in data["arms"]] == ["measured", "measured", "rejected"]
    assert "rejected by tool_call" in bad["detail"] and bad["metrics"] == []
    decode = next(m for m in slow["metrics"] if m["metric"] == "decode_tok_s")
    base = next(m for m in prod["metrics"] if m["metric"] == "decode_tok_s")
    # a run's decode is 1 / ITL median: None where a busy client read most chunks in one go
    assert len(decode["runs"]) == 2 and all(run is None or run > 0 for run in decode["runs"])
    # A first run the probe finds cold (run 1's TTFT an outlier: the clock decides) is left out, and
    # with it the run-to-run spread; either way the value and the spread are those of the runs kept.
    cold_first = any(f["flag"] == "warm-up" for f in slow["flags"])
    assert decode["runs_used"] == ([2] if cold_first else [1, 2])
    kept = [run for i, run in enumerate(decode["runs"], 1) if i in decode["runs_used"] and run is not None]
    assert (decode["run_spread"] is None) == (len(kept) < 2)
    change, band = decode["delta"], decode["noise_band"]
    assert (change is None) == (decode["value"] is None or base["value"] is None)
    if change is None or band is None:  # nothing to compare, or no spread to judge the change by
        assert decode["verdict"] == "unknown"
    else:
        assert change == pytest.approx((decode["value"] - base["value"]) / base["value"])
        assert decode["verdict"] == ("noise" if abs(change) <= band else "worse" if change < 0 else "better")
    # the arm's row is always there; the finding names decode only where its verdict left the noise
    assert "| slow |" in report
    named = "short c1 decode tok/s" in report.split("## Measured differences", 1)[1].split("\n## ", 1)[0]
    assert named == (decode["verdict"] in ("worse", "better"))
    assert (out / "report.md").read_text() == report
    assert [c["what"] for c in slow["changes"]] == ["--sim-slow-decode"]
    # production: stopped once, restored once, by a new launcher of the same command line
    assert data["restore"]["ok"] and data["restore"]["phase"] == "serving"
    status = box.wait_serving(not_pid=first.proc.pid if first.proc else None)
    assert status["serving_fingerprint"] == prod["fingerprint"] and data["downtime_s"] > 0
    assert not box.journal_path.exists() and (box.profiles / "prod.toml").read_bytes() == before
    events = [r["event"] for r in box.history() if r["event"].startswith("probe")]
    assert events == ["probe_started", "probe_arm", "probe_arm", "probe_arm", "probe_finished"]


def _session(box: Box, tmp_path: Path, measure: object) -> ProbeSession:
    """An in-process probe of one arm with a stand-in bench (it is the bench that fails on purpose)."""
    options = GlobalOptions(box.profiles, box.state)
    arms = build_arms(box.profiles, PROFILE, parse_arm_specs(["seqs8:max_num_seqs=8"], PROFILE))
    settings = Settings(bench_options("quick"), "quick", tmp_path / "out", restore_timeout_s=30)
    return ProbeSession(options, arms, settings, hooks=host_hooks(options, PROFILE), measure=measure)  # type: ignore[arg-type]


def test_without_a_baseline_no_arm_runs_and_production_is_never_stopped(box: Box, tmp_path: Path) -> None:
    first = box.start_production()

    def measure(arm: str, endpoint: object) -> Measurement:
        raise GateError(f"{endpoint} unreachable")

    result = _session(box, tmp_path, measure).run()
    assert [r.outcome for r in result.runs] == [ArmOutcome.FAILED, ArmOutcome.NOT_RUN]
    assert result.restored is not None and result.restored.ok and result.downtime_s is None
    assert result.stop_how is None and box.launcher_pid() == first.proc.pid  # type: ignore[union-attr]
    assert not box.journal_path.exists()


def test_sigterm_mid_arm_stops_the_arm_and_restores_production(box: Box, tmp_path: Path) -> None:
    first = box.start_production()
    # An arm that decodes 1000x slower (2 s a token, minutes of bench; the SIGTERM ends it), so the
    # signal meets the arm however long the second launcher below takes to be refused: at 20x (5 s)
    # it met the restore instead on a loaded host.
    slow = ("--arm", "seqs8:max_num_seqs=8", "--arm", "seqs8:sim_decode_ms=100000")
    probe = box.start_probe(*slow, *TINY_BENCH, out=tmp_path / "out")
    journal = box.wait_arm_running()
    # While the probe owns the box, a second production launcher is refused (exit 2, no restart loop).
    second = box.launch("--profile", PROFILE)
    assert second.returncode == 2 and "`launch probe` (pid" in second.stderr, second.stderr
    probe.send_signal(signal.SIGTERM)
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 1, err[-3000:]
    assert "interrupted by SIGTERM" in out and "| 1 | seqs8 |" in out and "interrupted: stopped while" in out
    assert group_alive(int(journal["arm_pgid"])) == []
    box.wait_serving(not_pid=first.proc.pid if first.proc else None)
    assert not box.journal_path.exists()


def test_sigint_while_measuring_production_cancels_the_bench_and_stops_nothing(
    box: Box, tmp_path: Path
) -> None:
    first = box.start_production()
    long_bench = ["--concurrency", "1", "--rounds", "3", "--prompts", "2", "--max-tokens", "1500"]
    probe = box.start_probe("--arm", "seqs8:max_num_seqs=8", *long_bench, out=tmp_path / "out")
    box.wait(lambda: (tmp_path / "out" / "arm-prod" / "run-1" / "requests.jsonl").exists(), "arm 0 measuring")
    probe.send_signal(signal.SIGINT)
    out, err = probe.communicate(timeout=20)
    assert probe.returncode == 1, err[-3000:]
    assert "interrupted by SIGINT" in out and "| 0 | prod |" in out and "| 1 | seqs8 | " in out
    assert "not run" in out.split("| 1 | seqs8 |")[1].splitlines()[0]
    assert box.launcher_pid() == first.proc.pid and box.status()["phase"] == "serving"  # type: ignore[union-attr]
    assert not box.journal_path.exists()


@pytest.mark.parametrize("restorer", ["probe --recover", "launch --profile"])
def test_sigkill_of_the_probe_mid_arm_is_undone_by_the_next_start(
    box: Box, tmp_path: Path, restorer: str
) -> None:
    first = box.start_production()
    probe = box.start_probe("--arm", "seqs8:max_num_seqs=8", *TINY_BENCH, out=tmp_path / "out")
    journal = box.wait_arm_running()
    arm_pgid = int(journal["arm_pgid"])
    probe.send_signal(signal.SIGKILL)
    probe.communicate(timeout=10)
    # The arm's server got SIGTERM from the kernel as the probe died (engine.py `die_with_this_process`)
    # and shuts down by itself; a stuck one is ended by the journal (test_probe_journal.py).
    box.wait(lambda: group_alive(arm_pgid) == [], "the arm to end with its probe", timeout_s=20)
    assert not alive(first.proc.pid)  # type: ignore[union-attr]
    told = box.launch("status")
    assert "launch probe --recover" in told.stdout and "comes back when it ends" not in told.stdout
    if restorer == "probe --recover":
        done = box.launch("probe", "--recover")
        assert done.returncode == 0, done.stderr[-3000:]
        assert "serving after" in done.stdout
    else:
        box.start_production()  # the operator (or systemd) starts production: it clears the journal
    assert group_alive(arm_pgid) == []
    box.wait_serving(not_pid=first.proc.pid if first.proc else None)
    assert not box.journal_path.exists()
    recovered = [r for r in box.history() if r["event"] == "probe_recovered"]
    assert len(recovered) == 1 and recovered[0]["arm_leftovers"] == []


FAKE_SYSTEMCTL = """\
import json, os, signal, subprocess, sys, time
from pathlib import Path

state = Path(os.environ["FAKE_SYSTEMD_STATE"])
with open(os.environ["FAKE_SYSTEMD_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
verb, unit = sys.argv[1], sys.argv[-1]
profile = unit.split("@", 1)[1].removesuffix(".service")
if verb == "stop":  # like systemd: SIGTERM to the main process, return once it is gone
    pid = json.loads((state / "profiles" / profile / "launcher.json").read_text())["pid"]
    os.kill(pid, signal.SIGTERM)
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
        time.sleep(0.02)
elif verb == "start":  # ExecStart={launch} --profile %i, detached from this command
    launch = os.environ["FAKE_SYSTEMD_LAUNCH"]
    subprocess.Popen([launch, "--profile", profile], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def test_an_error_under_systemd_still_restores_production_through_systemctl(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = box.start_production()
    program = tmp_path / "systemctl"
    program.write_text(f"#!{sys.executable}\n" + FAKE_SYSTEMCTL)
    program.chmod(0o755)
    calls = tmp_path / "systemctl.log"
    for name, value in box.env.items():
        monkeypatch.setenv(name, value)  # the arm, and the launcher `start` runs, are the box's
    monkeypatch.setenv("FAKE_SYSTEMD_STATE", str(box.state))
    monkeypatch.setenv("FAKE_SYSTEMD_LOG", str(calls))
    monkeypatch.setenv("FAKE_SYSTEMD_LAUNCH", str(LAUNCH))

    def under_systemd(state: Path, profile: str) -> Production:
        found = discover(state, profile)  # detection itself: tests/unit/test_probe_production.py
        return replace(found, mode=Mode.SYSTEMD, unit=unit_instance(profile), env=None)

    measured: list[str] = []

    def measure(arm: str, endpoint: object) -> Measurement:
        measured.append(arm)
        if arm == PROFILE:
            return Measurement((), 0.0, tmp_path)
        raise RuntimeError("bench blew up")  # a bug, not an operator error

    session = _session(box, tmp_path, measure)
    session.handover = Handover(box.state, session.clock, Systemctl(program=str(program), timeout_s=30))
    session.find_production = under_systemd
    result = session.run()
    assert measured == [PROFILE, "seqs8"]  # the arm was started and gated before the bug hit
    assert result.error is not None and "RuntimeError: bench blew up" in result.error
    assert "RuntimeError" in (tmp_path / "out" / "probe-error.txt").read_text()
    assert calls.read_text().splitlines() == [
        "stop vllm-gate@prod.service",
        "start --no-block vllm-gate@prod.service",
    ]
    assert result.stop_how == "systemctl stop vllm-gate@prod.service"
    assert result.restored is not None and result.restored.ok and result.downtime_s is not None
    assert result.restored.action == "systemctl start vllm-gate@prod.service"
    box.wait_serving(not_pid=first.proc.pid if first.proc else None)
    assert not box.journal_path.exists()


def test_a_parked_production_is_woken_to_restore_never_restarted(box: Box, tmp_path: Path) -> None:
    from tests.launcher_run import free_port

    box.write_prod(supervisor={"park": "sleep", "park_port": free_port()})
    first = box.start_production()
    engine = box.status()["engine_pid"]
    out = tmp_path / "out"
    done = box.launch("probe", "--profile", PROFILE, "--arm", "slow:sim_slow_decode=2", *TINY_BENCH,
                      "--out", str(out), "--no-plots")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    data = json.loads((out / "probe.json").read_text())
    assert [a["outcome"] for a in data["arms"]] == ["measured", "measured"]
    restore = data["restore"]
    assert (
        restore["ok"] and restore["phase"] == "serving" and restore["action"].startswith("woken: woken in ")
    )
    assert restore["seconds_to_serving"] >= 0 and data["downtime_s"] > 0
    status = box.status()
    assert status["launcher_pid"] == (first.proc.pid if first.proc else None)  # the same launcher …
    assert status["engine_pid"] == engine  # … and the same engine, asleep while the arm ran
    events = [r["event"] for r in box.history()]
    assert "parked" in events and "woken" in events and "engine_died" not in events
    assert not box.journal_path.exists()
    assert data["stop"].startswith("parked asleep by launcher pid")
    assert "woken: woken in " in done.stdout  # the report's "production after" line
