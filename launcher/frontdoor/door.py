"""One profile's front door as values: what it listens on, how long it holds a request, the engines
it may be pointed at, and its files in the state dir. Built from the profile's data, so the
dry run, `launch frontdoor` and the launcher (a candidate's profile data) read it one way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import BadInput, ProfileInvalid
from launcher.profile.findings import Findings
from launcher.profile.frontdoor_address import (
    AdminAddress,
    engine_dial,
    file_placeholder_problem,
    host_port,
    parse_admin,
)
from launcher.profile.frontdoor_rules import check_frontdoor
from launcher.profile.keys import FrontdoorSettings, SupervisorSettings, engine_settings, frontdoor_settings
from launcher.profile.loader import resolve
from launcher.profile.structure import check_structure
from launcher.state.store import StateStore


@dataclass(frozen=True, slots=True)
class Door:
    profile: str
    settings: FrontdoorSettings
    admin: AdminAddress
    engine_dials: tuple[str, ...]  # engine.port's, then park_port's when the profile parks
    home: Path  # the front door's directory: Caddy's own data and config dirs live under it
    config_path: Path
    target_path: Path
    hold_socket: Path
    lock_path: Path

    @property
    def listen(self) -> str:
        assert self.settings.port is not None
        return host_port(self.settings.host, self.settings.port)

    @property
    def url(self) -> str:
        """Where clients reach it (every interface: through loopback, as a local client would)."""
        return "http://" + engine_dial(self.settings.host, self.settings.port or 0)

    @property
    def hold_dial(self) -> str:
        """Caddy's dial of the hold socket: refused at once, so the request is tried again."""
        return f"unix/{self.hold_socket}"

    @property
    def engine_hosts(self) -> list[str]:
        """The addresses the door dials engines at (for the unit's IP allow list)."""
        return [dial.rpartition(":")[0].strip("[]") for dial in self.engine_dials]

    @property
    def engine_dial(self) -> str:
        """engine.port's dial: where the door points when nothing says another engine serves."""
        return self.engine_dials[0]


def load_door(profiles_dir: Path, profile: str, store: StateStore) -> Door:
    """The profile's front door, its profile resolved and checked for what the door reads: the
    shape of every table and `[frontdoor]`'s rules. No vLLM flag schema is loaded (that may import
    vLLM and torch), and a flag the engine would refuse does not keep the clients' port down."""
    resolved = resolve(profiles_dir, profile)
    findings = Findings()
    check_structure(resolved, findings)
    check_frontdoor(resolved, findings)
    if resolved.data.get("abstract") is True:
        findings.error(f"profile {profile!r} is abstract (only to be extended): it serves nothing")
    if findings.errors:
        raise ProfileInvalid(
            f"profile {profile!r} has {len(findings.errors)} error(s); nothing was started",
            findings.errors,
            hint=f"see `launch --profile {profile} --dry-run`",
        )
    return door_of(profile, resolved.data, store)


def has_frontdoor(profile_data: Mapping[str, Any]) -> bool:
    return frontdoor_settings(profile_data).enabled


def door_of(profile: str, profile_data: Mapping[str, Any], store: StateStore) -> Door:
    """The profile's front door; BadInput when it has none, or when a path of the state dir
    cannot go into Caddy's config (the profile's own values were checked with the profile)."""
    settings = frontdoor_settings(profile_data)
    if settings.port is None:
        raise BadInput(
            f"profile {profile!r} has no front door: [frontdoor] sets no port",
            hint="add `[frontdoor]` with `port = …` to the profile (docs/frontdoor.md)",
        )
    store = StateStore(store.root.absolute())  # Caddy runs elsewhere than here: no relative path
    admin_text = settings.admin or str(store.frontdoor_admin_socket(profile))
    admin = _parse(admin_text, "frontdoor.admin" if settings.admin else "the admin socket")
    _check_path(store.frontdoor_target_path(profile))
    return Door(
        profile=profile,
        settings=settings,
        admin=admin,
        engine_dials=_engine_dials(profile_data),
        home=store.frontdoor_dir(profile),
        config_path=store.frontdoor_config_path(profile),
        target_path=store.frontdoor_target_path(profile),
        hold_socket=store.frontdoor_hold_socket(profile),
        lock_path=store.frontdoor_lock_path(profile),
    )


def _engine_dials(profile_data: Mapping[str, Any]) -> tuple[str, ...]:
    engine = engine_settings(profile_data)
    host, port = engine.text("host"), engine.integer("port")
    supervisor = SupervisorSettings.read(_table(profile_data, "supervisor"))
    second = supervisor.second_port
    return (engine_dial(host, port),) + ((engine_dial(host, second),) if second else ())


def _table(data: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    table = data.get(name)
    return table if isinstance(table, Mapping) else None


def _parse(text: str, what: str) -> AdminAddress:
    try:
        return parse_admin(text)
    except ValueError as err:
        raise BadInput(
            f"{what} {text!r}: {err}",
            hint="set [frontdoor] admin to a shorter socket path, or to 127.0.0.1:PORT",
        ) from err


def _check_path(path: Path) -> None:
    problem = file_placeholder_problem(str(path))
    if problem is not None:
        raise BadInput(f"the front door's target file {path}: {problem}", hint="use another state dir")
