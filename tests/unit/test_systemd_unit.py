"""The systemd unit: the repository copy is the declared one, install-unit writes it, systemd accepts it."""

from __future__ import annotations

import configparser
import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from launcher.cli import launch
from launcher.errors import BadInput
from launcher.host.service_user import Needed, _blocked, launch_needs, service_user_notes
from launcher.host.unit import (
    SHIPPED_LAUNCH,
    UNIT_NAME,
    dropin_path,
    launch_executable,
    render_dropin,
    render_unit,
)
from launcher.host.unit_network import LOOPBACK_ENV, client_networks, ip_filter_lines
from tests.conftest import REPO, SHIPPED_PROFILES, tree_snapshot

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)


def install(tmp_path: Path, *extra: str) -> tuple[int, str]:
    args = ["--profiles-dir", str(SHIPPED_PROFILES), "--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(
        launch, [*args, "install-unit", "--unit-dir", str(tmp_path / "units"), *extra]
    )
    return result.exit_code, result.output


def verify(unit_dir: Path, instance: str) -> tuple[int, list[str]]:
    """systemd-analyze's complaints about our files (it also loads drop-ins beside the unit)."""
    assert SYSTEMD_ANALYZE is not None
    run = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", f"./{instance}"], cwd=unit_dir, capture_output=True, text=True, timeout=60
    )
    lines = (run.stdout + run.stderr).splitlines()
    return run.returncode, [line for line in lines if "vllm-gate@" in line or str(unit_dir) in line]


def directives(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def test_the_repository_unit_is_the_declared_template() -> None:
    assert (REPO / "systemd" / UNIT_NAME).read_text() == render_unit(SHIPPED_LAUNCH), (
        "regenerate systemd/vllm-gate@.service"
    )


def test_the_unit_says_what_docs_promise() -> None:
    unit = directives(render_unit(SHIPPED_LAUNCH))
    service = unit["Service"]
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "main")
    assert service["ExecStart"] == "/usr/bin/env launch --profile %i"
    # the reload's verdict is this command's exit status: `systemctl reload` fails when it was refused
    assert service["ExecReload"] == "/usr/bin/env launch reload --profile %i"
    assert (service["Restart"], service["RestartPreventExitStatus"]) == ("on-failure", "2 4")
    assert service["KillMode"] == "control-group"
    for key in ("TimeoutStartSec", "TimeoutStopSec", "WatchdogSec"):
        assert service[key], key
    assert (unit["Unit"]["StartLimitIntervalSec"], unit["Unit"]["StartLimitBurst"]) == ("2h", "3")


def test_install_unit_writes_the_unit_and_the_host_drop_in(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "prod")
    assert code == 0, output
    unit = (tmp_path / "units" / UNIT_NAME).read_text()
    assert directives(unit)["Service"]["ExecStart"] == f"{launch_executable()} --profile %i"
    assert directives(unit)["Service"]["ExecReload"] == f"{launch_executable()} reload --profile %i"
    assert Path(directives(unit)["Service"]["ExecStart"].split()[0]).is_absolute()
    dropin = (tmp_path / "units" / "vllm-gate@prod.service.d" / "10-host.conf").read_text()
    assert f"Environment=VLLM_GATE_PROFILES={SHIPPED_PROFILES}\n" in dropin
    assert f"Environment=VLLM_GATE_STATE={tmp_path / 'state'}\n" in dropin
    assert "EnvironmentFile=-/etc/vllm-gate/prod.env" in dropin
    assert "systemctl enable --now vllm-gate@prod" in output


def test_dry_run_prints_and_writes_nothing(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "prod", "--dry-run")
    assert code == 0, output
    assert f"--- would write {tmp_path / 'units' / UNIT_NAME}" in output
    assert "Type=notify" in output and "VLLM_GATE_PROFILES=" in output
    assert tree_snapshot(tmp_path) == {}


def test_an_unknown_profile_is_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "nope")
    assert code == 2, output
    assert tree_snapshot(tmp_path) == {}


@needs_systemd
def test_systemd_analyze_accepts_the_installed_unit(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "prod")
    assert code == 0, output
    rc, complaints = verify(tmp_path / "units", "vllm-gate@prod.service")
    assert (rc, complaints) == (0, [])


@needs_systemd
def test_systemd_analyze_would_catch_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a misspelt key is reported."""
    units = tmp_path / "units"
    units.mkdir()
    (units / UNIT_NAME).write_text(
        render_unit(str(launch_executable())).replace("WatchdogSec=", "WatchdogSecs=")
    )
    _, complaints = verify(units, "vllm-gate@prod.service")
    assert any("Unknown key 'WatchdogSecs'" in line for line in complaints), complaints


HARDENING = {
    "NoNewPrivileges": "yes",
    "PrivateTmp": "yes",
    "ProtectSystem": "full",
    "ProtectKernelTunables": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "User": "vllm-gate",
    "CapabilityBoundingSet": "",
    "SystemCallErrorNumber": "EPERM",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "PrivateMounts": "yes",
}


def all_values(text: str, key: str) -> list[str]:
    """Every `key=` line of the unit (configparser keeps only the last of a repeated key)."""
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_the_syscall_filter_keeps_what_cuda_needs_and_drops_the_privileged_calls() -> None:
    filters = all_values(render_unit(SHIPPED_LAUNCH), "SystemCallFilter")
    assert filters == ["@system-service pidfd_getfd", "~@privileged"]


def expand_syscalls(names: list[str]) -> set[str]:
    """systemd's own reading of `@group` names (nested groups expanded), from `systemd-analyze`."""
    assert SYSTEMD_ANALYZE is not None
    calls: set[str] = set()
    for name in names:
        if not name.startswith("@"):
            calls.add(name)
            continue
        run = subprocess.run(
            [SYSTEMD_ANALYZE, "syscall-filter", "--no-pager", name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = run.stdout.splitlines()[1:]  # the first line names the group itself
        calls |= expand_syscalls(
            [w for line in lines if not line.lstrip().startswith("#") for w in line.split()]
        )
    return calls


# What the stack under the unit calls, each for a reason the filter must not break.
NEEDED_CALLS = {
    "ioctl": "the CUDA driver and NVML talk to /dev/nvidia* with ioctl",
    "mremap": "the CUDA driver's mappings",
    "mbind": "NUMA placement: vLLM's NUMA binding (numactl) and NCCL",
    "set_mempolicy": "NUMA placement",
    "sched_setaffinity": "vLLM's and NCCL's CPU binding",
    "pidfd_open": "the launcher's reaper waits on pidfds",
    "pidfd_getfd": "CUDA memory shared as a file descriptor (PyTorch's symmetric memory)",
    "prctl": "the launcher's exec shim (PR_SET_PDEATHSIG), vLLM's process titles",
    "setsid": "vLLM runs in a session of its own",
    "flock": "GPU and profile locks",
    "fallocate": "shared-memory segments",
    "prlimit64": "vLLM raises its open-file limit",
    "clone3": "threads and processes (glibc)",
    "io_uring_setup": "io_uring-based weight loaders",
    "memfd_create": "anonymous shared memory",
}
PRIVILEGED_CALLS = ("mount", "chown", "setuid", "setgroups", "capset", "settimeofday", "init_module",
                    "reboot", "swapon", "iopl", "bpf", "chroot")  # fmt: skip


@needs_systemd
def test_the_syscall_filter_lets_through_what_the_stack_calls_and_nothing_privileged() -> None:
    allow, *deny = all_values(render_unit(SHIPPED_LAUNCH), "SystemCallFilter")
    allowed = expand_syscalls(allow.split()) - expand_syscalls([word.lstrip("~") for word in deny])
    assert len(allowed) > 300  # the groups were expanded, not taken as names
    assert {call: why for call, why in NEEDED_CALLS.items() if call not in allowed} == {}
    assert [call for call in PRIVILEGED_CALLS if call in allowed] == []


def test_the_unit_is_sandboxed_but_keeps_the_gpus_reachable() -> None:
    service = directives(render_unit(SHIPPED_LAUNCH))["Service"]
    assert {k: service.get(k) for k in HARDENING} == HARDENING
    # each of these would close the device list (and /dev/nvidia*), break CUDA/Triton JIT, or hide
    # what preflight must see
    for key in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "ProtectKernelLogs",
                "MemoryDenyWriteExecute", "ProtectHome", "ProtectProc", "PrivateUsers"):  # fmt: skip
        assert key not in service, key
    assert service["StateDirectory"] == "vllm-gate"  # writable under ProtectSystem=full


def test_install_unit_user_sets_user_in_the_drop_in(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "prod", "--user", "vllm")
    assert code == 0, output
    dropin = (tmp_path / "units" / "vllm-gate@prod.service.d" / "10-host.conf").read_text()
    assert directives(dropin)["Service"]["User"] == "vllm"
    code, output = install(tmp_path / "plain", "--profile", "prod")
    dropin = (tmp_path / "plain" / "units" / "vllm-gate@prod.service.d" / "10-host.conf").read_text()
    assert "User" not in directives(dropin)["Service"] and "#User=vllm-gate" in dropin  # the unit's default
    if not _user_exists("vllm-gate"):
        assert "note: user 'vllm-gate' does not exist on this host; create it first:" in output
        assert "useradd --system --user-group --home-dir /var/lib/vllm-gate" in output


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


needs_nobody = pytest.mark.skipif(not _user_exists("nobody"), reason="no user 'nobody' on this host")


@needs_nobody
def test_install_unit_names_what_the_service_user_cannot_reach(tmp_path: Path) -> None:
    """pytest's tmp dirs are 0700: a profiles dir there is out of `nobody`'s reach."""
    profiles = tmp_path / "profiles"
    shutil.copytree(SHIPPED_PROFILES, profiles)
    result = CliRunner().invoke(launch, [
        "--profiles-dir", str(profiles), "--state-dir", str(tmp_path / "state"),
        "install-unit", "--unit-dir", str(tmp_path / "units"), "--profile", "prod", "--user", "nobody",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "note: user 'nobody' cannot reach what the unit needs" in result.output
    assert f"  the profiles dir {profiles}: cannot enter " in result.output


@needs_nobody
def test_the_service_user_check_follows_the_launch_scripts_interpreter(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    script = bin_dir / "launch"
    script.write_text(f"#!{bin_dir / 'python3'}\nimport launcher\n")
    assert launch_needs(script) == [
        Needed("the launch executable", script, "rx"), Needed("its interpreter", bin_dir / "python3", "rx")
    ]  # fmt: skip
    reachable = Needed("env", Path("/usr/bin/env"), "rx")
    assert service_user_notes("nobody", [reachable]) == []
    notes = service_user_notes("nobody", [reachable, *launch_needs(script)])
    assert notes[0] == "note: user 'nobody' cannot reach what the unit needs (judged from mode bits):"
    assert notes[1].startswith(f"  the launch executable {script}: cannot enter "), notes
    real = Path(os.path.realpath(sys.executable))
    assert notes[2].startswith(f"  its interpreter {bin_dir / 'python3'}: (it is {real}) "), notes
    assert service_user_notes("root", launch_needs(script)) == []
    assert service_user_notes("no-such-user-x", [])[0].startswith(
        "note: user 'no-such-user-x' does not exist"
    )


@pytest.mark.parametrize("user", ["vllm gate", "root\nExecStartPre=/bin/sh", "", "-x", "a" * 40])
def test_a_user_name_systemd_would_misread_is_bad_input_and_writes_nothing(tmp_path: Path, user: str) -> None:
    code, output = install(tmp_path, "--profile", "prod", "--user", user)
    assert code == 2 and "error: --user" in output and "Traceback" not in output, output
    assert tree_snapshot(tmp_path) == {}


def test_user_without_a_profile_is_bad_input(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--user", "vllm")
    assert code == 2 and "--profile" in output
    assert tree_snapshot(tmp_path) == {}


@needs_systemd
def test_the_repository_unit_passes_verify_as_shipped(tmp_path: Path) -> None:
    shutil.copy(REPO / "systemd" / UNIT_NAME, tmp_path / UNIT_NAME)
    rc, complaints = verify(tmp_path, "vllm-gate@prod.service")
    assert (rc, complaints) == (0, [])


def security_score(unit_dir: Path, name: str) -> float:
    assert SYSTEMD_ANALYZE is not None
    run = subprocess.run(
        [SYSTEMD_ANALYZE, "security", "--offline=yes", "--no-pager", name],
        cwd=unit_dir, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    line = next(x for x in run.stdout.splitlines() if "Overall exposure level" in x)
    return float(line.split(":")[1].split()[0])


@needs_systemd
def test_systemd_analyze_security_rates_the_unit_at_most_5(tmp_path: Path) -> None:
    """9.6 UNSAFE before the sandbox, 7.2 MEDIUM with the first one; docs/host-safety.md records
    today's figures: the template, a loopback profile with its IP allow list, and root by choice."""
    assert install(tmp_path / "a", "--profile", "prod")[0] == 0
    assert install(tmp_path / "b", "--profile", "demo", "--user", "root")[0] == 0
    scores = {
        "template": security_score(tmp_path / "a" / "units", "vllm-gate@.service"),
        "prod": security_score(tmp_path / "a" / "units", "vllm-gate@prod.service"),
        "root, no IP list": security_score(tmp_path / "b" / "units", "vllm-gate@demo.service"),
    }
    assert all(score <= 5.0 for score in scores.values()), scores
    assert scores["prod"] < scores["template"] < scores["root, no IP list"], scores


LOCAL = {"model": "/models/m"}
DENY = "IPAddressDeny=any\nIPAddressAllow="


@pytest.mark.parametrize(
    ("host", "clients", "expected"),
    [
        ("127.0.0.1", [], DENY + "localhost\n"),
        ("localhost", [], DENY + "localhost\n"),
        ("::1", ["10.0.0.0/8"], DENY + "localhost 10.0.0.0/8\n"),
        ("10.1.2.3", ["10.0.0.0/8"], DENY + "localhost 10.1.2.3 10.0.0.0/8\n"),
        ("0.0.0.0", ["192.168.1.0/24"], DENY + "localhost 192.168.1.0/24\n"),
        ("0.0.0.0", [], "# IPAddressDeny= not set: the server binds 0.0.0.0: its clients' networks"),
        ("10.1.2.3", [], "# IPAddressDeny= not set: the server binds 10.1.2.3: its clients' networks"),
        ("gpu-01.lan", ["10.0.0.0/8"], "# IPAddressDeny= not set: the server binds the host name 'gpu-01"),
    ],
)
def test_the_ip_allow_list_lets_in_the_servers_clients_only(
    host: str, clients: list[str], expected: str
) -> None:
    lines = ip_filter_lines(host, LOCAL, {}, {}, clients)
    assert lines.startswith(expected), lines
    if lines.startswith("#"):
        assert all(line.startswith("#") for line in lines.splitlines())  # for the operator to finish


def test_with_the_list_vllm_nccl_and_gloo_talk_on_loopback_and_the_hub_is_off() -> None:
    """vLLM's single-GPU executor rendezvous at get_ip() (the host's address): with the list and
    without VLLM_HOST_IP it would be dropped (0.26 uniproc_executor.py, network_utils.py)."""
    lines = ip_filter_lines("127.0.0.1", LOCAL, {"tensor_parallel_size": 4}, {"OTHER": "1"}, [])
    env_lines = [line for line in lines.splitlines() if line.startswith("Environment=")]
    assert env_lines == [
        "Environment=VLLM_HOST_IP=127.0.0.1 NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo HF_HUB_OFFLINE=1"
    ]
    assert LOOPBACK_ENV["VLLM_HOST_IP"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("engine", "args", "env", "reason"),
    [
        ({"model": "Qwen/Qwen3-8B"}, {}, {}, "engine.model 'Qwen/Qwen3-8B' is not an absolute path"),
        ({"model": "./models/m"}, {}, {}, "engine.model './models/m' is not an absolute path"),
        (LOCAL, {"tokenizer": "Qwen/Qwen3-8B"}, {}, "args.tokenizer 'Qwen/Qwen3-8B' is not an absolute path"),
        (LOCAL, {"speculative_config": {"model": "org/d"}}, {}, "args.speculative_config.model 'org/d'"),
        (LOCAL, {"nnodes": 2}, {}, "args.nnodes = 2: the server talks to other hosts"),
        (LOCAL, {"headless": True}, {}, "args.headless = True: the server talks to other hosts"),
        (LOCAL, {"data_parallel_address": "10.0.0.1"}, {}, "args.data_parallel_address = '10.0.0.1'"),
        (LOCAL, {"distributed_executor_backend": "ray"}, {}, "Ray's cluster runs over the host's network"),
        (LOCAL, {"kv_transfer_config": {"kv_connector": "x"}}, {}, "KV transfer may reach other hosts"),
        (LOCAL, {}, {"NCCL_SOCKET_IFNAME": "eth0"}, "the profile's [env] sets NCCL_SOCKET_IFNAME='eth0'"),
        (LOCAL, {}, {"HF_HUB_OFFLINE": "0"}, "the profile's [env] sets HF_HUB_OFFLINE='0'"),
    ],
)  # fmt: skip
def test_a_server_that_needs_more_than_loopback_gets_the_lines_commented_with_why(
    engine: dict[str, Any], args: dict[str, Any], env: dict[str, str], reason: str
) -> None:
    lines = ip_filter_lines("127.0.0.1", engine, args, env, [])
    first = lines.splitlines()[0]
    assert first.startswith("# IPAddressDeny= not set: ") and reason in first, lines
    assert all(line.startswith("#") for line in lines.splitlines())
    # what does not leave the host stays filtered
    for same_host in ({"nnodes": 1}, {"headless": False}, {"data_parallel_address": "127.0.0.1"},
                      {"distributed_executor_backend": "mp"}, {"tokenizer": "/models/tok"}):  # fmt: skip
        assert ip_filter_lines("127.0.0.1", LOCAL, same_host, {}, []).startswith(DENY), same_host


def test_the_installed_drop_in_carries_the_allow_list_and_refuses_a_bad_network(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "prod", "--ip-allow", "10.0.0.0/8")
    assert code == 0, output
    dropin = (tmp_path / "units" / "vllm-gate@prod.service.d" / "10-host.conf").read_text()
    assert "IPAddressDeny=any\nIPAddressAllow=localhost 10.0.0.0/8\n" in dropin
    service = directives(dropin)["Service"]
    assert "VLLM_HOST_IP=127.0.0.1" in service["Environment"]
    for bad in ("10.0.0.0/33", "localhost\nExecStartPre=/bin/sh", "any"):
        code, output = install(tmp_path / "bad", "--profile", "prod", "--ip-allow", bad)
        assert code == 2 and "is not an IP address or network" in output, output
        assert not (tmp_path / "bad").exists()
    code, output = install(tmp_path / "demo", "--profile", "demo")  # a Hub name: commented, with why
    dropin = (tmp_path / "demo" / "units" / "vllm-gate@demo.service.d" / "10-host.conf").read_text()
    assert "# IPAddressDeny= not set: engine.model 'demo/fable-sim' is not an absolute path" in dropin
    assert "IPAddress" not in "".join(directives(dropin)["Service"])


@needs_systemd
def test_systemd_analyze_accepts_the_drop_in_with_its_allow_list(tmp_path: Path) -> None:
    code, output = install(
        tmp_path, "--profile", "prod", "--ip-allow", "10.0.0.0/8", "--ip-allow", "fd00::/8"
    )
    assert code == 0, output
    rc, complaints = verify(tmp_path / "units", "vllm-gate@prod.service")
    assert (rc, complaints) == (0, [])


# ---- the drop-in's values, rendered ------------------------------------------------------------


def test_the_drop_in_names_the_profiles_state_key_file_and_user(tmp_path: Path) -> None:
    text = render_dropin("prod", tmp_path / "profiles", tmp_path / "state", "MY_KEY", user="vllm")
    service = directives(text)["Service"]
    assert service["User"] == "vllm"
    assert service["EnvironmentFile"] == "-/etc/vllm-gate/prod.env"
    assert all_values(text, "Environment")[:3] == [
        f"VLLM_GATE_PROFILES={tmp_path / 'profiles'}",
        f"VLLM_GATE_STATE={tmp_path / 'state'}",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
    ]
    assert "put `MY_KEY=...` in this root-only (0600) file" in text
    assert "# IPAddressDeny= not set" in text, "no IP lines given: said so, nothing filtered"


def test_without_a_user_or_key_the_drop_in_leaves_the_units_default_commented(tmp_path: Path) -> None:
    text = render_dropin("prod", tmp_path, tmp_path, None)
    assert "#User=vllm-gate" in text and "User" not in directives(text)["Service"]
    assert "put `VLLM_API_KEY=...`" in text


def test_relative_and_home_paths_are_written_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    text = render_dropin("prod", Path("profiles"), Path("~/state"), None)
    assert f"Environment=VLLM_GATE_PROFILES={tmp_path / 'profiles'}\n" in text
    assert f"Environment=VLLM_GATE_STATE={tmp_path / 'home' / 'state'}\n" in text


def test_the_ip_lines_given_go_in_as_they_are(tmp_path: Path) -> None:
    lines = "IPAddressDeny=any\nIPAddressAllow=localhost"
    service = directives(render_dropin("prod", tmp_path, tmp_path, None, ip_lines=lines))["Service"]
    assert (service["IPAddressDeny"], service["IPAddressAllow"]) == ("any", "localhost")


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("/opt/a\tb/launch", "contains a control character"),
        ("/opt/a\x7fb/launch", "contains a control character"),
        ("/opt/a b/launch", "spaces, quotes or backslashes"),
        ("/opt/a'b/launch", "spaces, quotes or backslashes"),
        ("/opt/a\u00a0b/launch", "spaces, quotes or backslashes"),  # a no-break space is whitespace too
    ],
)
def test_a_launch_path_systemd_would_misread_is_refused(text: str, phrase: str) -> None:
    with pytest.raises(BadInput, match=phrase):
        render_unit(text)


def test_a_percent_in_the_launch_path_is_escaped_for_systemd() -> None:
    assert "ExecStart=/opt/100%%/bin/launch --profile %i\n" in render_unit("/opt/100%/bin/launch")
    assert "ExecStart=/usr/bin/env launch --profile %i\n" in render_unit(SHIPPED_LAUNCH)


def test_a_profiles_drop_in_lives_in_its_instance_directory(tmp_path: Path) -> None:
    assert dropin_path(tmp_path, "prod") == tmp_path / "vllm-gate@prod.service.d" / "10-host.conf"


@pytest.mark.parametrize("user", ["vllm", "_svc", "a" * 32, "vllm-gate_2"])
def test_user_names_in_the_portable_set_are_accepted(tmp_path: Path, user: str) -> None:
    assert f"User={user}\n" in render_dropin("p", tmp_path, tmp_path, None, user=user)


@pytest.mark.parametrize("user", ["Vllm", "1vllm", "a" * 33, "vllm.gate", "vllm$"])
def test_user_names_outside_the_portable_set_are_refused(tmp_path: Path, user: str) -> None:
    with pytest.raises(BadInput, match="invalid user name"):
        render_dropin("p", tmp_path, tmp_path, None, user=user)


# ---- the IP allow list ------------------------------------------------------------------------


def test_client_networks_are_normalised_as_systemd_reads_them() -> None:
    assert client_networks([" 10.1.2.3/8 ", "192.168.1.20", "fd00::1/8", "::1"]) == [
        "10.0.0.0/8",
        "192.168.1.20/32",
        "fd00::/8",
        "::1/128",
    ]
    assert client_networks([]) == []


@pytest.mark.parametrize("given", ["10.0.0.0/33", "localhost", "10.0.0", "", "any", "10.0.0.0/8 10.1.0.0/16"])
def test_a_client_network_that_is_not_one_is_refused_naming_it(given: str) -> None:
    with pytest.raises(BadInput, match=f"--ip-allow {given!r} is not an IP address or network"):
        client_networks([given])


def test_an_ipv6_server_address_is_allowed_in_brackets_or_bare() -> None:
    assert ip_filter_lines("[::1]", LOCAL, {}, {}, []).startswith(DENY + "localhost\n")
    assert ip_filter_lines("fd00::5", LOCAL, {}, {}, ["fd00::/8"]).startswith(
        DENY + "localhost fd00::5 fd00::/8\n"
    )
    assert ip_filter_lines("::", LOCAL, {}, {}, ["fd00::/8"]).startswith(DENY + "localhost fd00::/8\n")


def test_a_host_name_is_refused_for_the_list_even_with_clients_named_and_loopback_names_pass() -> None:
    assert ip_filter_lines("localhost", LOCAL, {}, {}, ["10.0.0.0/8"]).startswith(
        DENY + "localhost 10.0.0.0/8"
    )
    commented = ip_filter_lines("gpu-01.lan", LOCAL, {}, {}, [])
    assert commented.startswith("# IPAddressDeny= not set: the server binds the host name 'gpu-01.lan'")


def test_the_commented_lines_offer_the_clients_given_as_the_example() -> None:
    lines = ip_filter_lines("127.0.0.1", {"model": "org/m"}, {}, {}, ["10.0.0.0/8"])
    assert lines.splitlines()[1:] == ["#IPAddressDeny=any", "#IPAddressAllow=localhost 10.0.0.0/8"]
    bare = ip_filter_lines("127.0.0.1", {"model": "org/m"}, {}, {}, [])
    assert bare.splitlines()[-1] == "#IPAddressAllow=localhost 10.0.0.0/8", "an example when none given"


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "localhost"])
def test_data_parallel_on_this_host_needs_no_network(address: str) -> None:
    assert ip_filter_lines("127.0.0.1", LOCAL, {"data_parallel_address": address}, {}, []).startswith(DENY)


def test_the_profiles_own_loopback_settings_that_agree_keep_the_list() -> None:
    env = {"VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1"}
    assert ip_filter_lines("127.0.0.1", LOCAL, {}, env, []).startswith(DENY)
    no_model = ip_filter_lines("127.0.0.1", {}, {}, {}, [])
    assert no_model.startswith("# IPAddressDeny= not set: engine.model '' is not an absolute path")


# ---- the service user's reach, judged from mode bits ------------------------------------------

STRANGER = 4_000_123  # a uid no file here belongs to, in no group of theirs


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user may enter, on a path every user may enter (pytest's own tmp dirs are
    0700, so everything under them is out of a stranger's reach)."""
    path = Path(tempfile.mkdtemp(prefix="vllm-gate-reach-", dir="/tmp"))
    try:
        path.chmod(0o755)
        if not all(parent.stat().st_mode & stat.S_IXOTH for parent in path.parents):
            pytest.skip("/tmp is not open to every user here")
        yield path
    finally:
        shutil.rmtree(path)


def owner(path: Path) -> str:
    """`root:root` as CI runs: the owner and group names `ls -l` shows."""
    info = path.stat()
    return f"{pwd.getpwuid(info.st_uid).pw_name}:{grp.getgrgid(info.st_gid).gr_name}"


def test_a_file_the_user_may_not_read_is_named_with_its_mode(open_dir: Path) -> None:
    secret = open_dir / "weights.bin"
    secret.write_bytes(b"x")
    secret.chmod(0o600)
    why = _blocked(Needed("the model", secret, "r"), STRANGER, set())
    assert why == f"needs r on it (-rw------- {owner(secret)})"
    secret.chmod(0o644)
    assert _blocked(Needed("the model", secret, "r"), STRANGER, set()) == ""


def test_a_directory_on_the_way_the_user_cannot_enter_is_named_first(open_dir: Path) -> None:
    closed = open_dir / "closed"
    (closed / "inner").mkdir(parents=True)
    target = closed / "inner" / "launch"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    closed.chmod(0o700)
    assert _blocked(Needed("launch", target, "rx"), STRANGER, set()) == (
        f"cannot enter {closed} (drwx------ {owner(closed)})"
    )


def test_the_group_bits_count_for_a_member_and_the_owner_bits_for_the_owner(open_dir: Path) -> None:
    shared = open_dir / "shared.bin"
    shared.write_bytes(b"x")
    shared.chmod(0o640)
    gid = shared.stat().st_gid
    assert _blocked(Needed("m", shared, "r"), STRANGER, {gid}) == "", "a member of its group reads it"
    assert _blocked(Needed("m", shared, "r"), STRANGER, set()) != ""
    assert (
        _blocked(Needed("m", shared, "w"), STRANGER, {gid}) == f"needs w on it (-rw-r----- {owner(shared)})"
    )
    assert _blocked(Needed("m", shared, "rw"), shared.stat().st_uid, set()) == ""


def test_reading_a_directory_needs_entering_it_too(open_dir: Path) -> None:
    listed = open_dir / "models"
    listed.mkdir()
    listed.chmod(0o744)  # others may list the names but not enter
    assert (
        _blocked(Needed("the model", listed, "r"), STRANGER, set())
        == f"needs r on it (drwxr--r-- {owner(listed)})"
    )
    listed.chmod(0o755)
    assert _blocked(Needed("the model", listed, "r"), STRANGER, set()) == ""


def test_a_link_is_judged_at_its_target_and_says_so(open_dir: Path) -> None:
    real = open_dir / "real.bin"
    real.write_bytes(b"x")
    real.chmod(0o600)
    link = open_dir / "link.bin"
    link.symlink_to(real)
    assert (
        _blocked(Needed("m", link, "r"), STRANGER, set())
        == f"(it is {real}) needs r on it (-rw------- {owner(real)})"
    )


def test_a_path_that_is_not_there_is_left_for_the_start_to_name(open_dir: Path) -> None:
    assert _blocked(Needed("m", open_dir / "absent" / "x", "r"), STRANGER, set()) == ""


def test_a_launch_script_without_an_absolute_interpreter_needs_only_itself(open_dir: Path) -> None:
    env_form = open_dir / "launch"
    env_form.write_text("#!/usr/bin/env python3\n")
    assert launch_needs(env_form)[1:] == [Needed("its interpreter", Path("/usr/bin/env"), "rx")]
    relative = open_dir / "relative"
    relative.write_text("#!python3\n")
    assert launch_needs(relative) == [Needed("the launch executable", relative, "rx")]
    binary = open_dir / "binary"
    binary.write_bytes(b"\x7fELF\x02\x01")
    assert launch_needs(binary) == [Needed("the launch executable", binary, "rx")]
    assert launch_needs(open_dir / "absent") == [Needed("the launch executable", open_dir / "absent", "rx")]
