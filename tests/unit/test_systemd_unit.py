"""The systemd unit: the repository copy is the declared one, install-unit writes it, systemd accepts it."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import launch
from launcher.host.unit import SHIPPED_LAUNCH, UNIT_NAME, launch_executable, render_unit
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
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
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
}


def test_the_unit_is_sandboxed_but_keeps_the_gpus_reachable() -> None:
    service = directives(render_unit(SHIPPED_LAUNCH))["Service"]
    assert {k: service.get(k) for k in HARDENING} == HARDENING
    # each of these would close the device list (and /dev/nvidia*) or break CUDA/Triton JIT
    for key in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "ProtectKernelLogs",
                "MemoryDenyWriteExecute", "ProtectHome", "ProtectProc"):  # fmt: skip
        assert key not in service, key
    assert service["StateDirectory"] == "vllm-gate"  # writable under ProtectSystem=full


def test_install_unit_user_sets_user_in_the_drop_in(tmp_path: Path) -> None:
    code, output = install(tmp_path, "--profile", "prod", "--user", "vllm")
    assert code == 0, output
    dropin = (tmp_path / "units" / "vllm-gate@prod.service.d" / "10-host.conf").read_text()
    assert directives(dropin)["Service"]["User"] == "vllm"
    code, output = install(tmp_path / "plain", "--profile", "prod")
    dropin = (tmp_path / "plain" / "units" / "vllm-gate@prod.service.d" / "10-host.conf").read_text()
    assert "User" not in directives(dropin)["Service"] and "#User=vllm" in dropin


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


@needs_systemd
def test_systemd_analyze_security_rates_the_unit_medium_not_unsafe(tmp_path: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    code, output = install(tmp_path, "--profile", "prod", "--user", "vllm")
    assert code == 0, output
    scores = {}
    for name in ("vllm-gate@.service", "vllm-gate@prod.service"):
        run = subprocess.run(
            [SYSTEMD_ANALYZE, "security", "--offline=yes", "--no-pager", name],
            cwd=tmp_path / "units", capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        line = next(x for x in run.stdout.splitlines() if "Overall exposure level" in x)
        scores[name] = float(line.split(":")[1].split()[0])
    # 9.6 UNSAFE before the sandbox; docs/host-safety.md records the figures
    assert scores["vllm-gate@.service"] <= 7.2 and scores["vllm-gate@prod.service"] <= 6.8, scores
