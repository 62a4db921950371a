"""`[frontdoor]` checked with the rest of the profile: the values Caddy's config will carry, and the
ports it must not share with the engines (docs/frontdoor.md). Errors stop `launch frontdoor` and
`launch --profile` alike, before anything starts; the declarations (keys.FRONTDOOR) have already
judged each value's type and range."""

from __future__ import annotations

from typing import Any

from launcher.profile.findings import Findings, where
from launcher.profile.frontdoor_address import LOOPBACK_ADMIN_RE, admin_problem, listen_host_problem
from launcher.profile.keys import FRONTDOOR, SupervisorSettings, engine_settings, frontdoor_settings
from launcher.profile.loader import ResolvedProfile
from launcher.profile.semantics import is_loopback


def check_frontdoor(profile: ResolvedProfile, findings: Findings) -> None:
    table = profile.data.get("frontdoor")
    if not isinstance(table, dict) or not _well_typed(table):
        return  # absent, or the declarations' checks report it
    settings = frontdoor_settings(profile.data)
    if settings.port is None:
        if profile.data.get("abstract") is not True:
            findings.error(f"{_at(profile, 'port')} is missing: the clients' port (or leave [frontdoor] out)")
        return
    if (problem := listen_host_problem(settings.host)) is not None:
        findings.error(f"{_at(profile, 'host')} = {settings.host!r}: {problem}")
    if settings.admin is not None and (problem := admin_problem(settings.admin)) is not None:
        findings.error(f"{_at(profile, 'admin')} = {settings.admin!r}: {problem}")
    _check_ports(profile, settings.port, settings.admin, findings)
    engine_host = engine_settings(profile.data).text("host")
    if not is_loopback(engine_host):
        findings.warn(
            f"{_at(profile, 'port')}: engine.host = {engine_host!r} lets clients reach the engine around "
            "the front door (bind 127.0.0.1 and give clients frontdoor.port)"
        )


def _check_ports(profile: ResolvedProfile, port: int, admin: str | None, findings: Findings) -> None:
    """The door's port and a loopback admin port are no engine's: vLLM binds without SO_REUSEPORT
    and Caddy with it, so a shared port fails a start or splits the traffic."""
    taken = {engine_settings(profile.data).integer("port"): "engine.port"}
    supervisor = profile.data.get("supervisor")
    park_port = SupervisorSettings.read(supervisor if isinstance(supervisor, dict) else None).park_port
    if park_port is not None:
        taken.setdefault(park_port, "supervisor.park_port")
    if port in taken:
        findings.error(f"{_at(profile, 'port')} = {port} is {taken[port]}: the door needs a port of its own")
    taken.setdefault(port, "frontdoor.port")
    match = LOOPBACK_ADMIN_RE.match(admin or "")
    if match is not None and int(match["port"]) in taken:
        findings.error(f"{_at(profile, 'admin')} = {admin!r}: its port is {taken[int(match['port'])]}")


def _well_typed(table: dict[str, Any]) -> bool:
    known = {s.name: s for s in FRONTDOOR}
    return all(k in known and known[k].accepts(v) and known[k].problem(v) is None for k, v in table.items())


def _at(profile: ResolvedProfile, key: str) -> str:
    return where(profile.source_of(f"frontdoor.{key}"), f"frontdoor.{key}")
