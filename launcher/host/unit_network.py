"""The drop-in's IP allow list: `IPAddressDeny=any` with only what this profile's server needs.

systemd checks every IP packet of the unit against the remote address (ingress and egress,
systemd.resource-control(5)), so an allow list decides which clients reach the API and whether
vLLM may fetch from the Hub. It is written only where it cannot cut off what the server serves: a
server on one host, with its model on local disk, bound to loopback (its clients are on this host)
or with its clients' networks named (`install-unit --ip-allow 10.0.0.0/8`). Elsewhere the lines are
written commented, with the reason, for the operator to finish.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from launcher.errors import BadInput

WILDCARDS = ("", "0.0.0.0", "::")
# One host needs loopback only, but vLLM's own address is the source of its route to 8.8.8.8
# (vllm/utils/network_utils.py get_ip: VLLM_HOST_IP first), which the single-GPU executor's
# torch.distributed store listens on (vllm/v1/executor/uniproc_executor.py), and NCCL and Gloo
# bootstrap over a non-loopback interface unless told: a loopback-only list would drop all three.
# With the Hub out of reach, HF_HUB_OFFLINE makes a missing file an immediate, named error.
LOOPBACK_ENV = {
    "VLLM_HOST_IP": "127.0.0.1",
    "NCCL_SOCKET_IFNAME": "lo",
    "GLOO_SOCKET_IFNAME": "lo",
    "HF_HUB_OFFLINE": "1",
}


def client_networks(given: Sequence[str]) -> list[str]:
    """`--ip-allow` values as systemd reads them: addresses or networks (`10.0.0.0/8`, `fd00::/8`)."""
    networks = []
    for text in given:
        try:
            networks.append(str(ipaddress.ip_network(text.strip(), strict=False)))
        except ValueError:
            raise BadInput(
                f"--ip-allow {text!r} is not an IP address or network",
                hint="e.g. --ip-allow 10.0.0.0/8 --ip-allow 192.168.1.20",
            ) from None
    return networks


def ip_filter_lines(
    host: str,
    engine: Mapping[str, Any],
    args: Mapping[str, Any],
    env: Mapping[str, str],
    clients: Sequence[str],
) -> str:
    """The drop-in's network lines for a server bound to `host` with this profile's engine, args, env."""
    why = _needs_the_network(engine, args, env) or _clients_unknown(host, clients)
    if why:
        return _commented(why, clients)
    bound = _address(host)
    allowed = ["localhost"]  # the gates and `launch check` reach a wildcard bind through 127.0.0.1
    if bound is not None and not bound.is_loopback and not bound.is_unspecified:
        allowed.append(str(bound))  # the gates reach the server at the address it binds
    allowed += [net for net in clients if net not in allowed]
    lines = [
        "IPAddressDeny=any",
        f"IPAddressAllow={' '.join(allowed)}",
        "# vLLM's own address and NCCL's and Gloo's bootstrap interface on loopback, not on the host's",
        "# network address, which the list above drops; the Hub is out of reach (HF_HUB_OFFLINE).",
        "Environment=" + " ".join(f"{name}={value}" for name, value in LOOPBACK_ENV.items()),
    ]
    return "\n".join(lines)


def _needs_the_network(engine: Mapping[str, Any], args: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """Why this server needs more than loopback and its clients, or "" when it does not."""
    speculative = args.get("speculative_config")
    draft = speculative.get("model") if isinstance(speculative, Mapping) else None
    sources = {
        "engine.model": engine.get("model") or "",
        "args.tokenizer": args.get("tokenizer"),
        "args.speculative_config.model": draft,
    }
    for key, value in sources.items():
        if value is not None and not PurePosixPath(str(value)).is_absolute():
            return f"{key} {value!r} is not an absolute path: vLLM may fetch it from the Hub"
    for key, why in _multi_host(args).items():
        if why:
            return f"args.{key} = {args[key]!r}: {why}"
    for name, value in LOOPBACK_ENV.items():
        if name in env and env[name] != value:
            return f"the profile's [env] sets {name}={env[name]!r}, where the list needs {value!r}"
    return ""


def _multi_host(args: Mapping[str, Any]) -> dict[str, str]:
    """vLLM arguments (0.26 engine/arg_utils.py) that send traffic to other hosts, with why."""
    nnodes, address = args.get("nnodes"), args.get("data_parallel_address")
    other_hosts = "the server talks to other hosts"
    remote_address = address not in (None, "127.0.0.1", "::1", "localhost")
    return {
        "nnodes": other_hosts if isinstance(nnodes, int) and nnodes > 1 else "",
        "headless": other_hosts if args.get("headless") is True else "",
        "data_parallel_address": other_hosts if remote_address else "",
        "kv_transfer_config": "KV transfer may reach other hosts" if args.get("kv_transfer_config") else "",
        "distributed_executor_backend": _ray(args.get("distributed_executor_backend")),
        "data_parallel_backend": _ray(args.get("data_parallel_backend")),
    }


def _ray(backend: object) -> str:
    return "Ray's cluster runs over the host's network address" if backend == "ray" else ""


def _clients_unknown(host: str, clients: Sequence[str]) -> str:
    bound = _address(host)
    if bound is None and host not in ("localhost", *WILDCARDS):
        return f"the server binds the host name {host!r}; systemd's list takes addresses"
    if host != "localhost" and (bound is None or not bound.is_loopback) and not clients:
        return (
            f"the server binds {host or '0.0.0.0'}: its clients' networks are not known here "
            "(`launch install-unit --ip-allow NET` names them)"
        )
    return ""


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None  # a host name: systemd's list takes addresses only


def _commented(why: str, clients: Sequence[str]) -> str:
    example = " ".join(["localhost", *clients]) if clients else "localhost 10.0.0.0/8"
    return f"# IPAddressDeny= not set: {why}.\n#IPAddressDeny=any\n#IPAddressAllow={example}"
