"""Issue 42's inputs "as an attacker would", through the real `launch` (a subprocess each): every one
refused with exit 2 and a line naming the key, nothing written; a secret never in any output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.redact import MASK
from tests.conftest import tree_snapshot

LAUNCH = Path(sys.executable).with_name("launch")
BASE = '[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "m"\nport = 8000\n[args]\nmax_num_seqs = 4\n'


def launch(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(tmp_path / "profiles"), "--state-dir", str(tmp_path / "state")]
    return subprocess.run(
        [*argv, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def write(tmp_path: Path, text: str, name: str = "p") -> Path:
    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    path = profiles / f"{name}.toml"
    path.write_text(text)
    return path


def profile(engine: str = "", args: str = "", rest: str = "") -> str:
    """BASE with lines added to its `[engine]` and `[args]`, and tables after it."""
    text = BASE.replace("[engine]\n", f"[engine]\n{engine}", 1).replace("[args]\n", f"[args]\n{args}", 1)
    return text + rest


def assert_refused(done: subprocess.CompletedProcess[str], *phrases: str) -> None:
    shown = done.stdout + done.stderr
    assert done.returncode == 2, shown
    assert "Traceback" not in shown
    for phrase in phrases:
        assert phrase in shown, shown


# ---- [args] that duplicate [engine] -------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "args", "phrase"),
    [
        ('host = "127.0.0.1"\n', 'host = "0.0.0.0"\n', "args.host = '0.0.0.0' is vLLM's --host"),
        ("", "port = 9000\n", "args.port = 9000 is vLLM's --port"),
        ('served_model_name = "a"\n', 'served-model-name = "b"\n', "which the launcher renders from "
         "engine.served_model_name ('a')"),
        ("", 'model = "other"\n', "args.model = 'other' is vLLM's --model"),
        ("", 'api-key = "sk-live-123456"\n', "args.api_key: a literal API key in a profile"),
    ],
)  # fmt: skip
def test_an_engine_flag_in_args_is_refused_before_anything_starts(
    tmp_path: Path, engine: str, args: str, phrase: str
) -> None:
    """Was: `[args] host = "0.0.0.0"` beside `[engine] host` and `park = "sleep"` passed the dry run
    and rendered `--host 127.0.0.1 … --host 0.0.0.0`: the dev routes answered every address."""
    write(tmp_path, profile(engine, args, '[supervisor]\npark = "sleep"\npark_port = 8001\n'))
    before = tree_snapshot(tmp_path)
    assert_refused(launch(tmp_path, "--profile", "p", "--dry-run"), phrase)
    started = launch(tmp_path, "--profile", "p")
    assert_refused(started, phrase)
    assert "sk-live-123456" not in started.stdout + started.stderr
    assert tree_snapshot(tmp_path) == before and not (tmp_path / "state").exists()


def test_a_key_in_env_beside_api_key_env_is_refused(tmp_path: Path) -> None:
    write(tmp_path, profile('api_key_env = "SERVE_CRED"\n', rest='[env]\nSERVE_CRED = "sk-live-123456"\n'))
    done = launch(tmp_path, "--profile", "p", "--dry-run", env={"SERVE_CRED": "x" * 8})
    assert_refused(done, "env.SERVE_CRED: a literal API key in a profile beside engine.api_key_env")
    assert "sk-live-123456" not in done.stdout + done.stderr


# ---- secrets in output ------------------------------------------------------------------------

KEY = "sk-live-4f9a2c7e1b"


def test_set_never_prints_a_secret_it_writes(tmp_path: Path) -> None:
    """Was: `set … env.VLLM_API_KEY=<key> --dry-run` printed the key in the diff and on `keys:`."""
    write(tmp_path, BASE)
    for extra in ((), ("--dry-run",)):
        done = launch(tmp_path, "set", "--profile", "p", f"env.VLLM_API_KEY={KEY}", "--tag", f"t{len(extra)}",
                      *extra)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert KEY not in done.stdout + done.stderr
        assert (
            "env.VLLM_API_KEY: (unset) → ***" in done.stdout or "env.VLLM_API_KEY: *** → ***" in done.stdout
        )
    assert KEY in (tmp_path / "profiles" / "p.toml").read_text()  # written, only never shown
    again = launch(tmp_path, "set", "--profile", "p", "env.VLLM_API_KEY=sk-other-0000", "--dry-run")
    assert (
        KEY not in again.stdout and "sk-other-0000" not in again.stdout and "-VLLM_API_KEY = " in again.stdout
    )


def test_the_variable_api_key_env_names_is_masked_like_one(tmp_path: Path) -> None:
    write(tmp_path, profile('api_key_env = "SERVE_CRED"\n'))
    done = launch(
        tmp_path, "set", "--profile", "p", f"env.SERVE_CRED={KEY}", "--dry-run", env={"SERVE_CRED": "x"}
    )
    assert_refused(done, "env.SERVE_CRED: a literal API key in a profile beside engine.api_key_env")
    assert KEY not in done.stdout + done.stderr and 'SERVE_CRED = "***"' in done.stdout


@pytest.mark.parametrize("given", [f'env.VLLM_API_KEY="{KEY}', f"env.DB_PASSWORD={KEY}\n[evil]"])
def test_a_refused_assignment_does_not_echo_its_secret(tmp_path: Path, given: str) -> None:
    write(tmp_path, BASE)
    done = launch(tmp_path, "set", "--profile", "p", given, "--dry-run")
    assert_refused(done)
    assert KEY not in done.stdout + done.stderr


def test_a_bug_report_never_holds_a_secret_from_the_command_line(tmp_path: Path) -> None:
    """Was: with stdout at /dev/full `set --dry-run` exited 70 and the report's `command:` line held
    the key. Whatever the exit, no output and no report holds it."""
    write(tmp_path, BASE)
    argv = ["set", "--profile", "p", f"env.VLLM_API_KEY={KEY}", "--tag", "z", "--dry-run"]
    where = ["--profiles-dir", str(tmp_path / "profiles"), "--state-dir", str(tmp_path / "state")]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [str(LAUNCH), *where, *argv], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
            check=False, env={**os.environ, "TMPDIR": str(tmp_path)},
        )  # fmt: skip
    assert KEY not in done.stderr and "Traceback" not in done.stderr
    reports = [*tmp_path.glob("state/bug-reports/*"), *tmp_path.glob("vllm-gate-bug-reports/*")]
    for report in reports:
        text = report.read_text()
        assert KEY not in text and f"env.VLLM_API_KEY={MASK}" in text


def test_the_dry_run_masks_every_secret_named_variable(tmp_path: Path) -> None:
    write(tmp_path, profile(rest=f'[env]\nDB_PASSWORD = "{KEY}"\nHF_TOKEN = "{KEY}x"\nVLLM_X = "1"\n'))
    for extra in ((), ("--json",)):
        done = launch(tmp_path, "--profile", "p", "--dry-run", *extra)
        assert done.returncode == 0, done.stdout + done.stderr
        assert KEY not in done.stdout and "DB_PASSWORD" in done.stdout


# ---- --timeout-s ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "0", "1e400", "-inf"])
@pytest.mark.parametrize(
    "command",
    [
        ("set", "--profile", "p", "max_num_seqs=8", "--tag", "eight", "--apply"),
        ("rollback", "orig", "--profile", "p"),
        ("status", "--profile", "p", "--wait"),
    ],
    ids=["set", "rollback", "status"],
)
def test_a_timeout_is_a_positive_finite_number_of_seconds(
    tmp_path: Path, command: tuple[str, ...], value: str
) -> None:
    """Was: `set --apply --timeout-s -5` wrote the profile and sent the reload, then reported failure
    while the change succeeded; `nan` and `inf` were taken too."""
    path = write(tmp_path, BASE)
    path.with_name("p.toml.bak_orig").write_text(BASE.replace("max_num_seqs = 4", "max_num_seqs = 2"))
    before = tree_snapshot(tmp_path)
    done = launch(tmp_path, *command, "--timeout-s", value)
    assert_refused(done, "Invalid value for '--timeout-s'", "a positive, finite number of seconds")
    assert tree_snapshot(tmp_path) == before and not (tmp_path / "state").exists()


# ---- rollback --list of an unknown profile ------------------------------------------------------


def test_rollback_list_of_an_unknown_profile_is_bad_input(tmp_path: Path) -> None:
    """Was: exit 0 with "none" listed, hiding a typo; `rollback TAG --profile nope` already said 2."""
    write(tmp_path, BASE)
    assert_refused(
        launch(tmp_path, "rollback", "--list", "--profile", "nope"),
        "no profile 'nope'",
        "(profiles there: p)",
    )
    assert not (tmp_path / "state").exists()


def test_rollback_list_still_lists_the_snapshots_of_a_removed_profile(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    path.rename(path.with_name("p.toml.bak_orig"))
    done = launch(tmp_path, "rollback", "--list", "--profile", "p")
    assert done.returncode == 0, done.stderr
    assert "orig  saved " in done.stdout


# ---- keys that do nothing, dev mode in the open, a key that is not there ------------------------


@pytest.mark.parametrize(
    ("supervisor", "warning"),
    [
        ("keep_parked = true\n", 'supervisor.keep_parked has no effect without supervisor.park = "sleep"'),
        ("park_port = 8001\n", 'supervisor.park_port has no effect without supervisor.park = "sleep" or '
         'supervisor.trial = "beside"'),
    ],
)  # fmt: skip
def test_a_park_key_without_park_is_a_warning(tmp_path: Path, supervisor: str, warning: str) -> None:
    """Was: accepted silently: the operator believed a rollback would wake a sleeper in seconds."""
    write(tmp_path, profile(rest=f"[supervisor]\n{supervisor}"))
    done = launch(tmp_path, "--profile", "p", "--dry-run")
    assert done.returncode == 0 and f"warning: {tmp_path / 'profiles' / 'p.toml'}: {warning}" in done.stdout


def test_park_port_for_a_trial_beside_is_no_warning(tmp_path: Path) -> None:
    door = '[frontdoor]\nport = 9000\nadmin = "127.0.0.1:2019"\n'  # a socket under tmp_path is too long
    write(tmp_path, profile(rest='[supervisor]\ntrial = "beside"\npark_port = 8001\n' + door))
    done = launch(tmp_path, "--profile", "p", "--dry-run")
    assert done.returncode == 0, done.stdout
    assert "park_port has no effect" not in done.stdout


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "127.evil.example"])
def test_dev_mode_on_an_open_address_is_refused(tmp_path: Path, host: str) -> None:
    """Was: accepted silently without park; the dev routes (/collective_rpc among them) take no key."""
    write(tmp_path, profile(f'host = "{host}"\n', rest='[env]\nVLLM_SERVER_DEV_MODE = "1"\n'))
    for start in ((), ("--dry-run",)):
        assert_refused(launch(tmp_path, "--profile", "p", *start), "env.VLLM_SERVER_DEV_MODE = '1' with "
                       f"engine.host = '{host}': vLLM's dev routes")  # fmt: skip
    assert not (tmp_path / "state").exists()


def test_dev_mode_on_loopback_or_off_is_accepted(tmp_path: Path) -> None:
    for host, mode in (("127.0.0.1", "1"), ("0.0.0.0", "0")):
        write(tmp_path, profile(f'host = "{host}"\n', rest=f'[env]\nVLLM_SERVER_DEV_MODE = "{mode}"\n'))
        done = launch(tmp_path, "--profile", "p", "--dry-run")
        assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("value", [None, "", "   "])
def test_an_unset_api_key_variable_is_said_by_the_dry_run_and_refused_by_a_start(
    tmp_path: Path, value: str | None
) -> None:
    """Was: the dry run said nothing; a start got past preflight, wrote its state and then exited 2."""
    write(tmp_path, profile('api_key_env = "SERVE_CRED_42"\n'))
    env = {k: v for k, v in os.environ.items() if k != "SERVE_CRED_42"}
    if value is not None:
        env["SERVE_CRED_42"] = value
    dry = subprocess.run([str(LAUNCH), "--profiles-dir", str(tmp_path / "profiles"), "--state-dir",
                          str(tmp_path / "state"), "--profile", "p", "--dry-run"], capture_output=True,
                         text=True, timeout=120, check=False, env=env)  # fmt: skip
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert (
        "warning: engine.api_key_env names $SERVE_CRED_42, which is not set (or is empty) here" in dry.stdout
    )
    start = subprocess.run([str(LAUNCH), "--profiles-dir", str(tmp_path / "profiles"), "--state-dir",
                            str(tmp_path / "state"), "--profile", "p"], capture_output=True, text=True,
                           timeout=120, check=False, env=env)  # fmt: skip
    assert_refused(start, "engine.api_key_env names $SERVE_CRED_42", "nothing was started")
    assert not (tmp_path / "state").exists()


# ---- set: one value, one line -----------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        'served_model_name="x"\n[evil]',
        'served_model_name="x"\n[evil]\nhost = "0.0.0.0"',
        "max_num_seqs=8\r\n[engine]",
        'env.VLLM_X="a\x1b[2Jb"',  # a terminal escape
        "env\n.VLLM_X=1",
    ],
)
def test_set_refuses_a_value_that_would_break_out_of_its_line(tmp_path: Path, given: str) -> None:
    """Was: `set … 'served_model_name="x"\\n[evil]'` wrote served_model_name = "x" and dropped the
    table silently."""
    path = write(tmp_path, BASE)
    before = tree_snapshot(tmp_path)
    for extra in (("--dry-run",), ("--tag", "evil")):
        done = launch(tmp_path, "set", "--profile", "p", given, *extra)
        assert_refused(done)
        assert done.stderr.startswith("error: ") and "evil" not in path.read_text()
    assert tree_snapshot(tmp_path) == before
