"""The systemd unit `vllm-gate@.service` (instance = profile name) and its per-host drop-in.

Declared once here; `systemd/vllm-gate@.service` in the repository is `render_unit(SHIPPED_LAUNCH)`
and a test keeps the two equal. `launch install-unit` writes it with the absolute path of `launch`.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from launcher.errors import BadInput

UNIT_NAME = "vllm-gate@.service"
ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
# A unit name's instance part: what `launch --profile` accepts is a subset of what systemd allows.
INSTANCE_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
# User=: the portable user-name subset (useradd's default rule; systemd accepts at least these).
USER_RE = re.compile(r"\A[a-z_][a-z0-9_-]{0,31}\Z")
# The repository's copy must pass `systemd-analyze verify` as shipped: a bare `launch` fails it
# ("Command launch is not executable"); env finds `launch` on the service PATH and execs it (same pid).
SHIPPED_LAUNCH = "/usr/bin/env launch"
DROPIN_NAME = "10-host.conf"
DEFAULT_USER = "vllm-gate"

UNIT_TEMPLATE = """\
# vllm-gate@.service: one vLLM server per instance; the instance is the profile (vllm-gate@prod).
# `launch install-unit` writes this with the absolute path of `launch`; per-host settings go in
# vllm-gate@PROFILE.service.d/10-host.conf. docs/host-safety.md explains every choice below.
[Unit]
Description=vLLM behind vllm-gate (profile %i)
After=network-online.target nvidia-persistenced.service
Wants=network-online.target
# systemd's own brake on restart loops: at most 3 starts in 2 hours, then the unit stays failed.
# Keep the interval >= burst x (TimeoutStartSec + RestartSec), or slow failures never add up.
StartLimitIntervalSec=2h
StartLimitBurst=3

[Service]
Type=notify
NotifyAccess=main
ExecStart={launch} --profile %i
# The reload's verdict is the exit status of this command: `systemctl reload` waits for the gates and
# fails when the change was refused or rolled back (docs/host-safety.md, "Under systemd").
ExecReload={launch} reload --profile %i
# READY=1 comes after weights, torch.compile, CUDA-graph capture and every gate: the slowest good
# start plus the gate deadlines plus a margin (docs/host-safety.md, "Sizing TimeoutStartSec").
TimeoutStartSec=30min
# vLLM's graceful shutdown, then the launcher's TERM -> grace -> KILL of the whole group.
TimeoutStopSec=2min
# Armed once READY=1 is sent; the launcher pings every WatchdogSec/2 (WATCHDOG_USEC).
WatchdogSec=2min
Restart=on-failure
RestartSec=30s
# 2 = bad input, 4 = preflight refused: a restart cannot fix either, it would only loop.
RestartPreventExitStatus=2 4
# Stop and failure reach every process of the unit: vLLM's engine and workers leave no orphans.
KillMode=control-group
KillSignal=SIGTERM
SendSIGKILL=yes
StateDirectory=vllm-gate
Environment=PYTHONUNBUFFERED=1
LimitNOFILE=65536
# A dedicated, unprivileged user (`launch install-unit` says how to create it); the drop-in's User=
# overrides it. It needs the GPUs (/dev/nvidia*, usually 0666), the model and its caches; systemd
# chowns the state dir (StateDirectory) to it. Operate the state as it (docs/host-safety.md).
User=vllm-gate

# Hardening that vLLM on NVIDIA GPUs tolerates (docs/host-safety.md, "The unit's sandbox": why
# each is safe for vLLM). Not set, on purpose: PrivateDevices/DevicePolicy/DeviceAllow,
# ProtectClock, ProtectKernelLogs (each closes or may close the device list, and /dev/nvidia*),
# MemoryDenyWriteExecute (Triton and CUDA JIT-compile), ProtectHome (model and compile caches live
# there), ProtectProc/ProcSubset (preflight must see other users' vLLM processes and /proc/meminfo),
# PrivateUsers (other users' processes and files would all look like nobody's), RemoveIPC (with a
# shared User= it would delete that user's other shared memory).
# No capability: vLLM, CUDA, NCCL and the launcher need none (a root User= keeps none either; an
# orphan of another user is reaped by hand: `sudo launch preflight --profile P --reap-orphans`).
CapabilityBoundingSet=
# systemd's set for services, plus pidfd_getfd (CUDA memory shared between processes as a file
# descriptor is imported with it: PyTorch's symmetric memory); no privileged calls (mount, setuid,
# chown, clock, modules, swap, reboot, raw I/O). A call outside the list fails with EPERM, no SIGSYS.
SystemCallFilter=@system-service pidfd_getfd
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM
# Sockets: Unix (multiprocessing, ZMQ ipc, sd_notify), IPv4/6 (the API, torch.distributed, NCCL's
# bootstrap), netlink (interface lookup: NCCL, psutil, RDMA). IPAddressDeny= is per profile, in the
# drop-in.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
PrivateMounts=yes
NoNewPrivileges=yes
PrivateTmp=yes
ProtectSystem=full
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
SystemCallArchitectures=native
UMask=0027

[Install]
WantedBy=multi-user.target
"""

DROPIN_TEMPLATE = """\
# Per-host settings of vllm-gate@{profile}.service, written by `launch install-unit`; edit freely,
# then `systemctl daemon-reload`.
[Service]
Environment=VLLM_GATE_PROFILES={profiles_dir}
Environment=VLLM_GATE_STATE={state_dir}
# NVML numbers GPUs in PCI bus order; this makes CUDA (and so CUDA_VISIBLE_DEVICES) agree.
Environment=CUDA_DEVICE_ORDER=PCI_BUS_ID
# The GPUs of this server; unset: 0..N-1 for N = tensor x pipeline parallel size.
#Environment=CUDA_VISIBLE_DEVICES=0,1,2,3
# Secrets never go in a profile or in this file: put `{api_key_env}=...` in this root-only (0600) file.
EnvironmentFile=-/etc/vllm-gate/{profile}.env
# The user vLLM runs as (the unit's default is vllm-gate; it needs the GPUs, the model files and
# the state dir).
{user_line}
# Network: only what this profile's server needs (docs/host-safety.md, "The unit's sandbox").
{ip_lines}
"""


def render_unit(launch: str) -> str:
    """The unit for `launch`: an absolute path checked for unit syntax, or the shipped `env` form."""
    value = SHIPPED_LAUNCH if launch == SHIPPED_LAUNCH else unit_value(launch, "the launch executable")
    return UNIT_TEMPLATE.format(launch=value)


def render_dropin(
    profile: str,
    profiles_dir: Path,
    state_dir: Path,
    api_key_env: str | None,
    user: str | None = None,
    ip_lines: str = "",
) -> str:
    """The drop-in text; every value is checked against unit-file syntax first, because a newline
    in any of them would become a directive of its own (`ExecStartPre=`, run as root)."""
    if not INSTANCE_RE.match(profile):
        raise BadInput(f"invalid profile name {profile!r} for a unit instance", hint="letters, digits, -_.")
    if api_key_env is not None and not ENV_NAME_RE.match(api_key_env):
        raise BadInput(
            f"engine.api_key_env = {api_key_env!r}: not an environment variable name",
            hint="use [A-Za-z_][A-Za-z0-9_]*, for example VLLM_API_KEY",
        )
    if user is not None and not USER_RE.match(user):
        raise BadInput(f"invalid user name {user!r} for User=", hint="a system user name, e.g. vllm")
    return DROPIN_TEMPLATE.format(
        user_line=f"User={user}" if user else f"#User={DEFAULT_USER}",
        ip_lines=ip_lines or "# IPAddressDeny= not set",
        profile=profile,
        profiles_dir=_unit_path(profiles_dir),
        state_dir=_unit_path(state_dir),
        api_key_env=api_key_env or "VLLM_API_KEY",
    )


def unit_value(text: str, what: str) -> str:
    """`text` as it may stand unquoted in a unit line: `%` escaped as `%%` (systemd's specifier
    escape); control characters, whitespace, quotes and backslashes (which systemd would parse
    as escapes or separators) refused."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise BadInput(f"{what} {text!r} contains a control character; it cannot go in a systemd unit")
    if any(c.isspace() or c in "\\\"'" for c in text):
        raise BadInput(
            f"{text}: a path with spaces, quotes or backslashes cannot go in a systemd unit unquoted",
            hint="use another path",
        )
    return text.replace("%", "%%")


def dropin_path(unit_dir: Path, profile: str) -> Path:
    return unit_dir / f"vllm-gate@{profile}.service.d" / DROPIN_NAME


def launch_executable() -> Path:
    """The `launch` next to this Python (a venv's bin/), else on PATH; absolute, symlinks kept."""
    beside = Path(sys.executable).absolute().parent / "launch"
    if beside.is_file():
        return beside
    found = shutil.which("launch")
    if found:
        return Path(found).absolute()
    raise BadInput(
        "cannot find the `launch` executable",
        hint="install vllm-gate (pip install -e .) and run it from there",
    )


def _unit_path(path: Path) -> str:
    return unit_value(str(path.expanduser().absolute()), "the path")
