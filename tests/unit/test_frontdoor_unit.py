"""The front door's unit: the repository copy is the declared one, install-unit writes it (and a
profile's drop-in when the profile has a door), systemd accepts it, and its sandbox is the engine
unit's and tighter."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import launch
from launcher.host.frontdoor_unit import FRONTDOOR_UNIT_NAME, frontdoor_ip_lines, render_frontdoor_unit
from launcher.host.unit import SHIPPED_LAUNCH, UNIT_NAME, launch_executable, render_unit
from tests.conftest import REPO, SHIPPED_PROFILES, tree_snapshot
from tests.unit.test_systemd_unit import (
    HARDENING,
    all_values,
    directives,
    needs_systemd,
    security_score,
    verify,
)

DOOR = "\n[frontdoor]\nport = 9000\n"


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    """The shipped profiles, `prod` with a front door."""
    path = tmp_path / "profiles"
    shutil.copytree(SHIPPED_PROFILES, path)
    with (path / "prod.toml").open("a", encoding="utf-8") as toml:
        toml.write(DOOR)
    return path


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A state dir with a short path: the door's admin socket is made in it, and a unix socket path
    holds 107 bytes (pytest's own tmp paths under xdist are longer)."""
    path = Path(tempfile.mkdtemp(prefix="vg-fd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def install(profiles: Path, state: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(launch, [
        "--profiles-dir", str(profiles), "--state-dir", str(state),
        "install-unit", "--unit-dir", str(tmp_path / "units"), *extra,
    ])  # fmt: skip
    return result.exit_code, result.output


def door_dropin(tmp_path: Path, profile: str) -> Path:
    return tmp_path / "units" / f"vllm-gate-frontdoor@{profile}.service.d" / "10-host.conf"


def test_the_repository_unit_is_the_declared_template() -> None:
    assert (REPO / "systemd" / FRONTDOOR_UNIT_NAME).read_text() == render_frontdoor_unit(SHIPPED_LAUNCH), (
        "regenerate systemd/vllm-gate-frontdoor@.service"
    )


def test_the_unit_runs_the_door_and_is_bound_to_no_engine_unit() -> None:
    unit = directives(render_frontdoor_unit(SHIPPED_LAUNCH))
    service = unit["Service"]
    assert service["ExecStart"] == "/usr/bin/env launch frontdoor --profile %i"
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "main")  # Caddy sends READY=1
    assert (service["Restart"], service["RestartPreventExitStatus"]) == ("on-failure", "2 4")
    # a restart, crash or stop of vllm-gate@%i must never take the clients' port down
    for key in ("BindsTo", "PartOf", "Requires", "Requisite"):
        assert key not in unit["Unit"], key
    assert "ExecReload" not in service  # a reload of Caddy's config would end the held requests


def test_the_sandbox_is_the_engine_units_and_tighter() -> None:
    service = directives(render_frontdoor_unit(SHIPPED_LAUNCH))["Service"]
    assert {k: service.get(k) for k in HARDENING} == {
        **HARDENING,
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    }
    tighter = {"PrivateDevices": "yes", "ProtectHome": "read-only", "ProtectClock": "yes",
               "ProtectKernelLogs": "yes", "MemoryDenyWriteExecute": "yes", "UMask": "0077"}  # fmt: skip
    assert {k: service.get(k) for k in tighter} == tighter
    filters = all_values(render_frontdoor_unit(SHIPPED_LAUNCH), "SystemCallFilter")
    assert filters == ["@system-service", "~@privileged"]


def test_install_unit_writes_both_units_and_the_doors_drop_in(
    profiles: Path, state: Path, tmp_path: Path
) -> None:
    code, output = install(profiles, state, tmp_path, "--profile", "prod")
    assert code == 0, output
    door = (tmp_path / "units" / FRONTDOOR_UNIT_NAME).read_text()
    assert directives(door)["Service"]["ExecStart"] == f"{launch_executable()} frontdoor --profile %i"
    assert (tmp_path / "units" / UNIT_NAME).read_text() == render_unit(str(launch_executable()))
    dropin = door_dropin(tmp_path, "prod").read_text()
    assert f"Environment=VLLM_GATE_PROFILES={profiles}\n" in dropin
    assert f"Environment=VLLM_GATE_STATE={state}\n" in dropin
    assert "IPAddressDeny=any\nIPAddressAllow=localhost\n" in dropin  # a loopback door, loopback engine
    assert "systemctl enable --now vllm-gate@prod vllm-gate-frontdoor@prod" in output


def test_a_profile_without_a_door_gets_the_template_but_no_drop_in(
    profiles: Path, state: Path, tmp_path: Path
) -> None:
    code, output = install(profiles, state, tmp_path, "--profile", "demo")
    assert code == 0, output
    assert (tmp_path / "units" / FRONTDOOR_UNIT_NAME).is_file()
    assert not door_dropin(tmp_path, "demo").exists()
    assert "vllm-gate-frontdoor@" not in output.split("next:")[1]


def test_the_drop_in_carries_the_user_and_the_clients_networks(
    profiles: Path, state: Path, tmp_path: Path
) -> None:
    code, output = install(
        profiles, state, tmp_path, "--profile", "prod", "--user", "vllm", "--ip-allow", "10.0.0.0/8"
    )
    assert code == 0, output
    service = directives(door_dropin(tmp_path, "prod").read_text())["Service"]
    assert (service["User"], service["IPAddressAllow"]) == ("vllm", "localhost 10.0.0.0/8")


def test_a_door_profile_that_does_not_check_is_bad_input_and_writes_nothing(
    profiles: Path, state: Path, tmp_path: Path
) -> None:
    with (profiles / "demo.toml").open("a", encoding="utf-8") as toml:
        toml.write("\n[frontdoor]\nport = 8765\n")  # demo's engine.port
    code, output = install(profiles, state, tmp_path, "--profile", "demo")
    assert code == 2 and "frontdoor.port = 8765 is engine.port" in output, output
    assert tree_snapshot(tmp_path / "units") == {}


@pytest.mark.parametrize(
    ("host", "engines", "clients", "expected"),
    [
        ("127.0.0.1", ["127.0.0.1"], [], "IPAddressDeny=any\nIPAddressAllow=localhost"),
        ("0.0.0.0", ["127.0.0.1", "::1"], ["10.0.0.0/8"], "IPAddressDeny=any\nIPAddressAllow=localhost 1"),
        ("127.0.0.1", ["10.1.2.3"], [], "IPAddressDeny=any\nIPAddressAllow=localhost 10.1.2.3"),
        ("0.0.0.0", ["127.0.0.1"], [], "# IPAddressDeny= not set: the door binds 0.0.0.0: its clients'"),
        ("127.0.0.1", ["gpu-01.lan"], ["10.0.0.0/8"], "# IPAddressDeny= not set: an engine binds the host"),
    ],
)  # fmt: skip
def test_the_doors_allow_list_lets_in_its_clients_and_reaches_its_engines(
    host: str, engines: list[str], clients: list[str], expected: str
) -> None:
    lines = frontdoor_ip_lines(host, engines, clients)
    assert lines.startswith(expected), lines
    if lines.startswith("#"):
        assert all(line.startswith("#") for line in lines.splitlines())


@needs_systemd
def test_systemd_analyze_accepts_the_installed_door(profiles: Path, state: Path, tmp_path: Path) -> None:
    code, output = install(profiles, state, tmp_path, "--profile", "prod", "--ip-allow", "fd00::/8")
    assert code == 0, output
    rc, complaints = verify(tmp_path / "units", "vllm-gate-frontdoor@prod.service")
    assert (rc, complaints) == (0, [])


@needs_systemd
def test_the_repository_door_unit_passes_verify_as_shipped(tmp_path: Path) -> None:
    shutil.copy(REPO / "systemd" / FRONTDOOR_UNIT_NAME, tmp_path / FRONTDOOR_UNIT_NAME)
    rc, complaints = verify(tmp_path, "vllm-gate-frontdoor@prod.service")
    assert (rc, complaints) == (0, [])


@needs_systemd
def test_systemd_analyze_security_rates_the_door_below_the_engine_unit(
    profiles: Path, state: Path, tmp_path: Path
) -> None:
    """The door needs no GPU: its exposure is below the engine unit's (docs/frontdoor.md has the figures)."""
    assert install(profiles, state, tmp_path, "--profile", "prod")[0] == 0
    units = tmp_path / "units"
    door, engine = (
        security_score(units, "vllm-gate-frontdoor@prod.service"),
        security_score(units, "vllm-gate@prod.service"),
    )
    assert door < engine <= 5.0, (door, engine)
