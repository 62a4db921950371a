"""The systemd unit `vllm-gate-frontdoor@.service` (instance = profile name): the profile's front
door, `launch frontdoor --profile %i`, which execs Caddy (docs/frontdoor.md), and its per-host
drop-in.

A unit of its own, bound to nothing: a restart, crash or stop of `vllm-gate@%i` never takes the
clients' port down. Declared once here; `systemd/vllm-gate-frontdoor@.service` in the repository is
`render_frontdoor_unit(SHIPPED_LAUNCH)` and a test keeps the two equal. Its sandbox is
`vllm-gate@.service`'s and tighter: Caddy needs no GPU, no device and nothing in a home directory.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from launcher.errors import BadInput
from launcher.host.unit import DEFAULT_USER, INSTANCE_RE, SHIPPED_LAUNCH, USER_RE, unit_value

FRONTDOOR_UNIT_NAME = "vllm-gate-frontdoor@.service"

FRONTDOOR_TEMPLATE = """\
# vllm-gate-frontdoor@.service: the front door of a profile (vllm-gate-frontdoor@prod): Caddy on the
# profile's [frontdoor] port, forwarding to the engine that vllm-gate@prod serves (docs/frontdoor.md).
# Bound to nothing on purpose: a restart, crash or stop of vllm-gate@prod leaves the clients' port up,
# and requests wait at the door (hold_s) while no engine serves. Per-host settings go in
# vllm-gate-frontdoor@PROFILE.service.d/10-host.conf.
[Unit]
Description=Front door of vLLM profile %i (Caddy, vllm-gate)
After=network-online.target
Wants=network-online.target
StartLimitIntervalSec=10min
StartLimitBurst=5

[Service]
# `launch frontdoor` execs Caddy in the same process, which sends READY=1 once its config is loaded.
Type=notify
NotifyAccess=main
ExecStart={launch} frontdoor --profile %i
# SIGTERM: Caddy stops accepting, and the streams in flight get [frontdoor] drain_timeout_s to finish
# (its HTTP grace period); keep this above it.
TimeoutStopSec=2min
Restart=on-failure
RestartSec=2s
# 2 = bad input (the profile, or a door of this profile already runs), 4 = no caddy executable.
RestartPreventExitStatus=2 4
KillMode=control-group
StateDirectory=vllm-gate
LimitNOFILE=65536
# The launcher's user: the door reads the profile and the state dir, and its admin socket (mode 0200,
# owner only) must be reachable by the launcher that points it.
User=vllm-gate

# Hardening (docs/frontdoor.md, "The unit"): vllm-gate@.service's, and what a GPU server cannot
# take: no devices, no clock, no kernel logs, no writable home, no W+X memory.
# No capability: [frontdoor] port must be 1024 or above (or add
# AmbientCapabilities=CAP_NET_BIND_SERVICE and CapabilityBoundingSet=CAP_NET_BIND_SERVICE in the drop-in).
CapabilityBoundingSet=
SystemCallFilter=@system-service
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
PrivateDevices=yes
PrivateMounts=yes
PrivateTmp=yes
NoNewPrivileges=yes
ProtectSystem=full
ProtectHome=read-only
ProtectClock=yes
ProtectKernelLogs=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
SystemCallArchitectures=native
UMask=0077

[Install]
WantedBy=multi-user.target
"""

FRONTDOOR_DROPIN_TEMPLATE = """\
# Per-host settings of vllm-gate-frontdoor@{profile}.service, written by `launch install-unit`; edit
# freely, then `systemctl daemon-reload`. The same profiles and state dir as vllm-gate@{profile}.
[Service]
Environment=VLLM_GATE_PROFILES={profiles_dir}
Environment=VLLM_GATE_STATE={state_dir}
# The user the door runs as: the launcher's (the unit's default is vllm-gate).
{user_line}
# Network: the clients, and the engines on loopback (docs/frontdoor.md, "The unit").
{ip_lines}
"""


def render_frontdoor_unit(launch: str) -> str:
    value = SHIPPED_LAUNCH if launch == SHIPPED_LAUNCH else unit_value(launch, "the launch executable")
    return FRONTDOOR_TEMPLATE.format(launch=value)


def frontdoor_dropin_path(unit_dir: Path, profile: str) -> Path:
    return unit_dir / f"vllm-gate-frontdoor@{profile}.service.d" / "10-host.conf"


def render_frontdoor_dropin(
    profile: str, profiles_dir: Path, state_dir: Path, user: str | None, ip_lines: str
) -> str:
    """Every value checked against unit-file syntax first (a newline would start a directive)."""
    if not INSTANCE_RE.match(profile):
        raise BadInput(f"invalid profile name {profile!r} for a unit instance", hint="letters, digits, -_.")
    if user is not None and not USER_RE.match(user):
        raise BadInput(f"invalid user name {user!r} for User=", hint="a system user name, e.g. vllm")
    return FRONTDOOR_DROPIN_TEMPLATE.format(
        profile=profile,
        profiles_dir=unit_value(str(profiles_dir.expanduser().absolute()), "the path"),
        state_dir=unit_value(str(state_dir.expanduser().absolute()), "the path"),
        user_line=f"User={user}" if user else f"#User={DEFAULT_USER}",
        ip_lines=ip_lines,
    )


def frontdoor_ip_lines(host: str, engine_hosts: list[str], clients: list[str]) -> str:
    """An allow list where the door's peers are all known: its clients (on loopback, or named by
    `--ip-allow`) and the engines it forwards to (loopback, or an address of this host's, which
    `localhost` does not cover). Else the lines commented, with the reason, for the operator."""
    loopback = ("127.0.0.1", "::1", "localhost")
    engines = sorted({h for h in engine_hosts if h not in loopback})
    named = [h for h in engines if not _is_ip(h)]
    if named:
        reason = f"an engine binds the host name {named[0]!r}"
    elif not clients and host not in loopback:
        reason = f"the door binds {host}: its clients' networks are not known (install-unit --ip-allow NET)"
    else:
        return "IPAddressDeny=any\nIPAddressAllow=" + " ".join(["localhost", *engines, *clients])
    return f"# IPAddressDeny= not set: {reason}; by hand:\n#IPAddressDeny=any\n#IPAddressAllow=localhost NET"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
