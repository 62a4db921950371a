"""After `set --apply` or `rollback`: make the profile's running launcher reload, report the verdict.

The launcher does the work (start the candidate, gate it, promote or go back to last-good); this
side only finds it in the state dir, signals it and waits for the verdict it writes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from launcher.errors import BadInput, ExitCode
from launcher.state.store import StateStore

DEFAULT_RELOAD_TIMEOUT_S = 1800.0  # a 27B model loads and captures graphs for minutes, not seconds

# Keyed by the verdict's outcome (launcher/supervisor/reload_requests.py), not read from its words.
VERDICTS = {
    "promoted": "reloaded: the launcher serves the profile as it is now",
    "unchanged": "reloaded: the launcher serves the profile as it is now",
    "rolled_back": "rolled back: the gates rejected the change; the last good launch is served again",
    "failed": "the reload failed: the change was rejected and nothing good could be served",
    "refused": "refused before anything was stopped: the running engine keeps serving",
    "invalid": "refused: the profile does not render; the running engine keeps serving",
}


def running_profiles(state_dir: Path) -> dict[str, int]:
    """Profile → pid of its live launcher, from `STATE/profiles/*/launcher.json`."""
    from launcher.supervisor.control import running_launcher_pid

    found: dict[str, int] = {}
    root = StateStore(state_dir).profiles_root
    if not root.is_dir():
        return found
    for profile_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        pid = running_launcher_pid(state_dir, profile_dir.name)
        if pid is not None:
            found[profile_dir.name] = pid
    return found


def served_profile(state_dir: Path) -> str:
    """The one profile a launcher serves now; with none or several, the operator must name it."""
    running = running_profiles(state_dir)
    if len(running) == 1:
        return next(iter(running))
    if not running:
        raise BadInput(
            f"no launcher is running (state dir {state_dir}), so there is no served profile to act on",
            hint="name the profile: --profile NAME",
        )
    listing = ", ".join(f"{name} (pid {pid})" for name, pid in running.items())
    raise BadInput(f"several launchers are running: {listing}", hint="name the profile: --profile NAME")


class ReloadProgress:
    """One line per new phase and per new gate result while a reload runs, so a wait of up to
    30 minutes is never silent, on a terminal or off it. What the status showed before the reload
    (the last start's phase and gates) is not repeated."""

    def __init__(self, before: dict[str, Any] | None) -> None:
        self.started = time.monotonic()
        self.phase = (before or {}).get("phase")
        self.shown = len((before or {}).get("gates") or [])
        self.live = False  # the launcher writes this request's progress lines: they say it all

    def line(self, record: dict[str, Any]) -> None:
        """One progress line of the launcher, as `launch try` shows it (`[12s] gating: gate 2/4
        graph_capture: pass summary=…`)."""
        self.live = True
        extra = "".join(
            f" {key}={value}"
            for key, value in record.items()
            if key not in ("event", "msg", "phase", "elapsed_s", "gate", "index", "total")
        )
        self._say(f"{record.get('phase')}: {record.get('msg')}{extra}")

    def __call__(self, status: dict[str, Any]) -> None:
        if self.live:
            return
        gates = [g for g in status.get("gates") or [] if isinstance(g, dict)]
        if status.get("phase") != self.phase:
            self.phase = status.get("phase")
            self._say(f"phase {self.phase}")
            if self.phase == "starting":
                self.shown = len(gates)  # still the previous start's
        self.shown = min(self.shown, len(gates))
        for gate in gates[self.shown :]:
            self._say(f"gate {gate.get('name')}: {gate.get('verdict')} — {gate.get('summary') or ''}")
        self.shown = len(gates)

    def _say(self, text: str) -> None:
        click.echo(f"  [{time.monotonic() - self.started:5.0f}s] {text}")


def reload_if_running(state_dir: Path, profile: str, timeout_s: float) -> int:
    """Reload the profile's launcher and return its verdict as an exit code; 0 when none runs."""
    from launcher.supervisor.control import reload_and_wait, running_launcher_pid
    from launcher.supervisor.status import read_status

    pid = running_launcher_pid(state_dir, profile)
    if pid is None:
        click.echo(f"no launcher is running profile {profile!r}: the change takes effect at its next start")
        return int(ExitCode.OK)
    click.echo(
        f"launcher pid {pid} serves {profile!r}: reloading it, waiting up to {timeout_s:g} s for the gates"
    )
    before = read_status(StateStore(state_dir).status_path(profile))
    progress = ReloadProgress(before)
    verdict = reload_and_wait(state_dir, profile, timeout_s, on_status=progress, on_progress=progress.line)
    code = verdict.exit_code
    said = VERDICTS.get(verdict.outcome)
    if said is None or (verdict.outcome == "failed" and code != int(ExitCode.GATE_FAILED)):
        said = f"the reload ended with exit code {code}"  # the launcher is leaving on an error
    click.echo(said)
    if verdict.detail:
        click.echo(f"  {'why' if code else 'now'}: {verdict.detail}")
    if verdict.data.get("trial") == "beside":
        click.echo("  production served all along: the change was tried beside it (no downtime)")
    elif verdict.down_s is not None:
        click.echo(
            f"  the engine was down {verdict.down_s:.1f} s (from the stop for the reload to serving again)"
        )
    elif verdict.outcome in ("unchanged", "refused", "invalid"):
        click.echo("  the engine kept serving: no downtime")
    return code


def note_if_running(state_dir: Path, profile: str, apply_hint: str) -> None:
    """Without --apply a running launcher keeps serving the old profile: say so."""
    from launcher.supervisor.control import running_launcher_pid

    pid = running_launcher_pid(state_dir, profile)
    if pid is not None:
        click.echo(f"launcher pid {pid} still serves the previous {profile!r}; to switch now: {apply_hint}")
