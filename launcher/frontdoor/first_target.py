"""Where a front door that starts now points: the engine that serves, as the state dir records it
(status.json's phase, and the promoted launch's address: `launch status`'s URL), else engine.port.

The launcher points the door after every move (`FrontdoorAdmin.point_at`); this is only the first
target, for a door started (or restarted by systemd) while no launcher has told it anything yet.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from launcher.errors import BadInput
from launcher.frontdoor.door import Door
from launcher.profile.frontdoor_address import engine_dial
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.state.serving import serving_entry
from launcher.state.store import StateStore


def first_target(door: Door, store: StateStore) -> tuple[str, str]:
    """(the dial, why it was chosen, in words)."""
    try:
        status = read_record(store.status_path(door.profile), STATUS, STATUS_OPTIONAL)
        last_good = store.last_good(door.profile) if status is not None else None
    except BadInput as err:  # a corrupt record: the door still starts, where the profile says
        return door.engine_dial, f"engine.port: the state could not be read ({err.message})"
    if status is None:
        return door.engine_dial, "engine.port: the profile has not run yet"
    url = serving_entry(door.profile, status, last_good, profile_known=True)["engine_url"]
    dial = _dial_of(url) if isinstance(url, str) else None
    if dial is None:
        return door.engine_dial, f"engine.port: nothing serves now (phase {status['phase']})"
    return dial, f"what serves now (phase {status['phase']}, {url})"


def _dial_of(url: str) -> str | None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    return engine_dial(parts.hostname, port) if parts.hostname and port else None
