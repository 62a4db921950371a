"""`launch reload --profile NAME`: the running launcher re-reads its profile; the exit code is the
reload's verdict. It is the unit's `ExecReload=`: systemd takes a reload's result from that
process's exit status (a notification cannot carry a refusal: docs/host-safety.md, "Under
systemd"), so `systemctl reload vllm-gate@NAME` waits for the verdict and fails when the change was
refused or rejected, where `kill -HUP` returned at once and always said success.
"""

from __future__ import annotations

import click

from launcher.commands.profile_arg import profile_option
from launcher.errors import BadInput
from launcher.profile.loader import NAME_RE
from launcher.settings import GlobalOptions

from .live_reload import DEFAULT_RELOAD_TIMEOUT_S, reload_if_running


@click.command("reload")
@profile_option("The profile whose launcher reloads.", required=True)
@click.pass_obj
def reload_command(options: GlobalOptions, profile: str) -> None:
    """Make the running launcher of a profile serve the profile as it is now, and wait for the verdict.

    \b
    What `systemctl reload vllm-gate@NAME` runs. The change is judged as `launch set --apply` judges
    it (refused before anything stops, tried, promoted or rolled back), for up to 30 minutes.
    Exit code: the verdict — 0 serving it (or already was), 3 rejected and last-good serves,
    4 refused (the running engine kept), 2 the profile does not render (kept), 1 nothing serves.
    No --json: its lines narrate the wait; then `launch status --profile NAME --json` says what serves.
      launch reload --profile prod
    """
    if not NAME_RE.match(profile):
        raise BadInput(f"invalid profile name {profile!r}", hint="use letters, digits, '-', '_' and '.'")
    from launcher.supervisor.control import running_launcher_pid

    if running_launcher_pid(options.state_dir, profile) is None:
        raise BadInput(
            f"no launcher is running profile {profile!r} (state dir {options.state_dir}): nothing to reload",
            hint=f"start it: `launch --profile {profile}` or `systemctl start vllm-gate@{profile}`",
        )
    click.get_current_context().exit(reload_if_running(options.state_dir, profile, DEFAULT_RELOAD_TIMEOUT_S))
