"""Shell completion of profile names, rollback tags and `launch set`'s keys (issue 44, point 3), through
click's own completion machinery: its bash, zsh and fish classes in-process, the real entry point as
each shell's script calls it, and bash itself running the script `launch` prints for it.

Completion reads the profiles dir the command line names, and never raises: a missing dir, a corrupt
profile or no running launcher completes nothing, or less, never a traceback into the prompt."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import click
import pytest
from click.shell_completion import BashComplete, FishComplete, ShellComplete, ZshComplete

from launcher.cli import COMMANDS, launch
from launcher.completion import profile_names
from tests.launcher_run import LAUNCH

SHIPPED = ["base", "demo", "fable-27b", "prod", "spark", "spark-baseline", "spark-no-prefix"]
VAR = "_LAUNCH_COMPLETE"


def complete(args: list[str], incomplete: str, shell: type[ShellComplete] = BashComplete) -> list[str]:
    return [item.value for item in shell(launch, {}, "launch", VAR).get_completions(args, incomplete)]


def helps(args: list[str], incomplete: str) -> dict[str, str | None]:
    items = ZshComplete(launch, {}, "launch", VAR).get_completions(args, incomplete)
    return {item.value: item.help for item in items}


def test_every_profile_option_completes_profile_names(shipped_profiles: Path) -> None:
    at = ["--profiles-dir", str(shipped_profiles)]
    assert sorted(complete([*at, "--profile"], "")) == sorted(SHIPPED)
    assert complete([*at, "--profile"], "spark-") == ["spark-baseline", "spark-no-prefix"]
    for name in COMMANDS:
        command = launch.get_command(click.Context(launch), name)
        assert command is not None
        for param in command.params:
            if "--profile" in getattr(param, "opts", ()):
                assert param._custom_shell_complete is profile_names, name  # noqa: SLF001 - click's own slot
                assert complete([*at, name, "--profile"], "de") == ["demo"], name
    assert complete([*at, "logs"], "f") == ["fable-27b"]  # the older positional form


def test_a_profile_is_shown_with_its_description(shipped_profiles: Path) -> None:
    shown = helps(["--profiles-dir", str(shipped_profiles), "--profile"], "")
    assert shown["demo"] == "demo on the embedded simulator: no GPU needed"
    assert shown["base"] is not None and shown["base"].startswith("(abstract) ")


def test_the_profiles_dir_is_the_one_the_command_would_read(
    shipped_profiles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "solo.toml").write_text('[engine]\nmodel = "m"\n')
    monkeypatch.setenv("VLLM_GATE_PROFILES", str(other))
    assert complete(["--profile"], "") == ["solo"]
    assert "demo" in complete(["--profiles-dir", str(shipped_profiles), "--profile"], "")  # the flag wins
    monkeypatch.delenv("VLLM_GATE_PROFILES")
    monkeypatch.chdir(shipped_profiles.parent)
    shipped_profiles.rename(shipped_profiles.with_name("profiles"))
    assert "prod" in complete(["--profile"], "p")  # the default: ./profiles


def test_a_missing_or_corrupt_dir_completes_nothing_and_never_raises(tmp_path: Path) -> None:
    missing = ["--profiles-dir", str(tmp_path / "nowhere")]
    assert complete([*missing, "--profile"], "") == []
    assert complete([*missing, "rollback", "--profile", "prod"], "") == []
    assert complete([*missing, "set", "--profile", "prod"], "max_num_se") == ["max_num_seqs="]
    a_file = tmp_path / "a-file"
    a_file.write_text("not a dir")
    assert complete(["--profiles-dir", str(a_file), "--profile"], "") == []
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "broken.toml").write_bytes(b"[engine\n\xff\xfe")
    (corrupt / "loop.toml").symlink_to(corrupt / "loop.toml")
    (corrupt / "..bad name.toml").write_text("")
    assert complete(["--profiles-dir", str(corrupt), "--profile"], "") == ["broken"]
    assert helps(["--profiles-dir", str(corrupt), "--profile"], "") == {"broken": None}
    assert complete(["--profiles-dir", str(corrupt), "set", "--profile", "broken"], "enforce_e") == [
        "enforce_eager="
    ]


def test_rollback_completes_the_profiles_tags_newest_first(shipped_profiles: Path, state_dir: Path) -> None:
    for age, tag in enumerate(["newest", "middle", "oldest"]):
        path = shipped_profiles / f"prod.toml.bak_{tag}"
        path.write_text("")
        os.utime(path, (1_800_000_000 - age, 1_800_000_000 - age))
    (shipped_profiles / "demo.toml.bak_other").write_text("")
    at = ["--profiles-dir", str(shipped_profiles), "--state-dir", str(state_dir)]
    assert complete([*at, "rollback", "--profile", "prod"], "") == ["newest", "middle", "oldest"]
    assert complete([*at, "--profile", "prod", "rollback"], "m") == ["middle"]  # `launch --profile` too
    assert complete([*at, "rollback"], "") == []  # no --profile and no launcher serving: no guess
    assert helps([*at, "rollback", "--profile", "prod"], "old") == {"oldest": "saved 2027-01-15 07:59 UTC"}


def test_set_completes_keys_as_assignments(shipped_profiles: Path) -> None:
    at = ["--profiles-dir", str(shipped_profiles), "set", "--profile"]
    assert complete([*at, "prod"], "max_num_se") == ["max_num_seqs="]
    assert complete([*at, "prod"], "max-num-se") == ["max_num_seqs="]  # kebab-case as the profile may
    keys = complete([*at, "prod"], "")
    assert {"tensor_parallel_size=", "enforce_eager=", "engine.model=", "gates.order="} <= set(keys)
    assert {
        "supervisor.park=",
        "frontdoor.port=",
        "preflight.reap_orphans=",
        "gates.health.timeout_s=",
    } <= set(keys)
    # flags [engine] renders, and the `--no-` forms a profile writes as `x = false`, are not offered
    assert not {"host=", "port=", "model=", "served_model_name=", "api_key=", "no_enforce_eager="} & set(keys)
    assert not any(k.startswith(("env.", "sim_")) for k in keys)  # env only once asked; sim flags: no
    assert complete([*at, "prod"], "env.VLLM_LOGGING_L") == ["env.VLLM_LOGGING_LEVEL="]
    assert "sim_weights_gib=" in complete([*at, "demo"], "sim_w")  # demo runs vllm-sim
    assert complete(["--profiles-dir", str(shipped_profiles), "set"], "pr") == ["prod"]  # the older form


@pytest.mark.parametrize("shell", [ZshComplete, FishComplete])
def test_values_of_a_closed_list_complete_after_the_equals_sign(
    shipped_profiles: Path, shell: type[ShellComplete]
) -> None:
    """zsh and fish hand the word over whole: the completions are whole words too."""
    at = ["--profiles-dir", str(shipped_profiles), "set", "--profile", "prod"]
    assert complete(at, "kv_cache_dtype=fp8_e", shell) == [
        "kv_cache_dtype=fp8_e4m3",
        "kv_cache_dtype=fp8_e5m2",
    ]
    assert complete(at, "enforce_eager=", shell) == ["enforce_eager=true", "enforce_eager=false"]
    assert complete(at, "supervisor.park=", shell) == ["supervisor.park=stop", "supervisor.park=sleep"]
    assert complete(at, "max_num_seqs=", shell) == []  # not a closed list


def test_bash_splits_the_word_at_the_equals_sign_and_gets_the_value_alone(shipped_profiles: Path) -> None:
    at = ["--profiles-dir", str(shipped_profiles), "set", "--profile", "prod"]
    assert complete([*at, "kv_cache_dtype", "="], "fp8_e") == ["fp8_e4m3", "fp8_e5m2"]
    assert complete([*at, "enforce_eager"], "") == ["true", "false"]  # right after `=`: click drops it


def _entry_point(shell: str, words: str, cword: str) -> list[str]:
    env = {**os.environ, VAR: f"{shell}_complete", "COMP_WORDS": words, "COMP_CWORD": cword}
    done = subprocess.run([str(LAUNCH)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.splitlines()


def test_the_real_entry_point_answers_each_shell_in_its_format(shipped_profiles: Path) -> None:
    words = f"launch --profiles-dir {shipped_profiles} set --profile demo kv_cache_dtype=fp8_e4"
    assert _entry_point("bash", words, "6") == ["plain,kv_cache_dtype=fp8_e4m3"]
    assert _entry_point("zsh", words, "6") == ["plain", "kv_cache_dtype=fp8_e4m3", "_"]
    assert _entry_point("fish", words, "kv_cache_dtype=fp8_e4") == ["plain,kv_cache_dtype=fp8_e4m3"]
    described = _entry_point("fish", f"launch --profiles-dir {shipped_profiles} --profile de", "de")
    assert described == ["plain,demo\tdemo on the embedded simulator: no GPU needed"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_itself_completes_through_the_script_launch_prints(shipped_profiles: Path) -> None:
    """What an operator gets after `eval "$(_LAUNCH_COMPLETE=bash_source launch)"`: bash splits the
    line at `=` itself (COMP_WORDBREAKS), calls the function, and reads COMPREPLY."""
    script = (
        f'eval "$({VAR}=bash_source launch)"\n'
        'COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()\n'
        "_launch_completion launch\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{LAUNCH.parent}{os.pathsep}{os.environ['PATH']}"}

    def bash(*words: str) -> list[str]:
        argv = [
            "bash",
            "--norc",
            "-c",
            script,
            "bash",
            "launch",
            "--profiles-dir",
            str(shipped_profiles),
            *words,
        ]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line]

    assert bash("set", "--profile", "prod", "tensor_parallel_s") == ["tensor_parallel_size="]
    assert bash("set", "--profile", "prod", "kv_cache_dtype", "=", "fp8_e") == ["fp8_e4m3", "fp8_e5m2"]
    assert bash("rollback", "--profile", "prod", "") == []
    assert bash("--profile", "spark-") == ["spark-baseline", "spark-no-prefix"]
    assert bash("--profile", "") == SHIPPED  # in order: bash is told not to sort (-o nosort)
