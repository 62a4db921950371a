"""What a profile serves now, in one shape a script can trust, and the exit code that says it.

`launch status` exits like `systemctl status`: 0 serving the profile's launch, 6 serving its
last-good (a change was rejected: scripts must not read that as healthy), 3 not
serving (starting, gating, rolling back, stopped, failed, never run — or up, but judged `wedged` or
`failing` by the serving watch: requests hang or fail), 4 unknown: no such profile (neither a
profile file nor any state), or a record its running launcher could not keep confirmed (`stale`
says why: a full or read-only state dir; launcher/supervisor/status.py `stale_cause`). Its JSON is
always `{"state_dir": …, "profiles": [entry, …]}`, with one entry per profile, also when one is
asked for by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launcher.errors import BadInput
from launcher.profile.frontdoor_address import engine_dial
from launcher.profile.keys import engine_settings, frontdoor_settings
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.state.store import StateStore

SERVING_PHASES = frozenset({"serving", "serving_last_good"})
NOT_SERVING_VERDICTS = frozenset({"wedged", "failing"})  # launcher/watch/verdict.py `Verdict.serves`
UNKNOWN = "unknown"
NEVER_RUN = "never_run"
EXIT_SERVING = 0
EXIT_NOT_SERVING = 3
EXIT_UNKNOWN = 4
EXIT_SERVING_LAST_GOOD = 6


def serving_entry(
    name: str,
    status: dict[str, Any] | None,
    last_good: dict[str, Any] | None,
    *,
    profile_known: bool,
    profile_fingerprint: str | None = None,
) -> dict[str, Any]:
    """One profile: the launcher's status keys as written, plus the normalised ones scripts read
    (`serving`, `url`, `engine_url`, `served_model`, `uptime_s`, `fingerprint`, `gates`), and the
    fingerprint the profile file renders to now: when it differs from `fingerprint`, the file holds
    a change that does not serve (not applied yet, or rejected by the gates). `url` is where clients
    reach what serves — its front door when it has one — and `engine_url` the engine itself."""
    if status is None:
        phase = NEVER_RUN if profile_known else UNKNOWN
        return {
            "profile": name,
            "phase": phase,
            "serving": False,
            "url": None,
            "engine_url": None,
            "served_model": None,
            "uptime_s": None,
            "fingerprint": None,
            "profile_fingerprint": profile_fingerprint,
            "gates": [],
            "stale": None,
        }
    up = status.get("phase") in SERVING_PHASES
    record = last_good if up and _same_launch(status, last_good) else None
    serving = up and watch_verdict(status) not in NOT_SERVING_VERDICTS
    engine_url = _url(record) or (status.get("url") if up else None)
    door_url = status.get("frontdoor_url") if up else None
    return {
        **status,
        "serving": serving,
        "url": door_url or engine_url,
        "engine_url": engine_url,
        "served_model": _served_model(record),
        "uptime_s": status.get("uptime_s"),
        "fingerprint": status.get("serving_fingerprint"),
        "profile_fingerprint": profile_fingerprint,
        "gates": status.get("gates") or [],
        "stale": status.get("stale"),  # why a live launcher's record is not believed (phase `unknown`)
    }


def watch_verdict(status: dict[str, Any]) -> str | None:
    """The serving watch's verdict in a status record, when one runs."""
    watch = status.get("watch")
    verdict = watch.get("verdict") if isinstance(watch, dict) else None
    return verdict if isinstance(verdict, str) else None


def exit_code(entries: list[dict[str, Any]]) -> int:
    """4 when one asked for is unknown (no such profile, or a stale record); 3 when one does not
    serve; 6 when every one serves but one serves its last-good; 0 when every one serves its launch."""
    if any(entry["phase"] == UNKNOWN for entry in entries):
        return EXIT_UNKNOWN
    if not entries or not all(entry["serving"] for entry in entries):
        return EXIT_NOT_SERVING
    if any(entry["phase"] == "serving_last_good" for entry in entries):
        return EXIT_SERVING_LAST_GOOD
    return EXIT_SERVING


def drift(entry: dict[str, Any]) -> str | None:
    """The profile file renders to another launch than the one that serves (a change not applied,
    or rejected and rolled back): in words, with the command that shows the difference."""
    served, file = entry.get("fingerprint"), entry.get("profile_fingerprint")
    if not entry.get("serving") or not served or not file or served == file:
        return None
    return (
        f"the profile file renders {file}, but {served} serves: "
        f"`launch --profile {entry['profile']} --dry-run` shows the difference"
    )


def _same_launch(status: dict[str, Any], last_good: dict[str, Any] | None) -> bool:
    """last_good.json describes what serves only when its fingerprint is the served one."""
    return last_good is not None and last_good.get("fingerprint") == status.get("serving_fingerprint")


def serving_now(store: StateStore, name: str) -> dict[str, Any]:
    """`serving_entry` from what the state dir says now; an unreadable record says nothing."""
    try:
        status = read_record(store.status_path(name), STATUS, STATUS_OPTIONAL)
        last_good = store.last_good(name) if status is not None else None
    except BadInput:
        status = last_good = None
    return serving_entry(name, status, last_good, profile_known=True)


def reach_now(store: StateStore, name: str, profile_data: Mapping[str, Any]) -> str:
    """`reach_url` from what the state dir says serves now."""
    return reach_url(profile_data, serving_now(store, name))


def reach_url(profile_data: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    """Where a client of the profile reaches what serves now: its front door when the profile has
    one; else the engine that serves (`entry`: `serving_entry`'s, which knows the port a parked change
    left it on); else the profile's engine.port. What `launch check`, `bench` and `probe` address."""
    door = frontdoor_settings(profile_data)
    if door.port is not None:
        return "http://" + engine_dial(door.host, door.port)
    engine_url = entry.get("engine_url")
    if isinstance(engine_url, str):
        return engine_url
    engine = engine_settings(profile_data)
    return "http://" + engine_dial(engine.text("host"), engine.integer("port"))


def _url(record: dict[str, Any] | None) -> str | None:
    if record is None or not isinstance(record.get("port"), int):
        return None
    host = str(record.get("host") or "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{f'[{host}]' if ':' in host else host}:{record['port']}"


def _served_model(record: dict[str, Any] | None) -> str | None:
    expect = record.get("expect") if record is not None else None
    names = expect.get("served_model_names") if isinstance(expect, dict) else None
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return ", ".join(names)
    return None
