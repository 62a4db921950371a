"""`launch --profile NAME`: the systemd ExecStart form — foreground until SIGTERM/SIGINT."""

from __future__ import annotations

from launcher.probe.recovery import settle_before_serve
from launcher.settings import GlobalOptions
from launcher.supervisor.progress import configure_logging
from launcher.supervisor.service import Supervisor
from launcher.supervisor.wiring import host_hooks


def run_serve(options: GlobalOptions, name: str, *, allow_unknown: bool, retry_rejected: bool = False) -> int:
    configure_logging()
    settle_before_serve(options.state_dir, name)  # a killed `launch probe`'s arm: ended; this start restores
    supervisor = Supervisor(
        options,
        name,
        allow_unknown=allow_unknown,
        hooks=host_hooks(options, name),
        retry_rejected=retry_rejected,
    )
    return supervisor.run()
