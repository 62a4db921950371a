"""Secrets are never shown (launcher/redact.py): the values of `--api-key` and `--hf-token` in every
form argv takes, the secret variables of an environment, and the lines vLLM itself logs with them
(0.26.0 prints `non-default args: {...}` with `repr`, entrypoints/serve/utils/api_utils.py)."""

from __future__ import annotations

import pytest

from launcher.redact import (
    MASK,
    LineRedactor,
    assigned_secrets,
    is_secret_name,
    note_secret_name,
    redact_argv,
    redact_env,
    secret_values,
    secrets_in,
)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["vllm", "serve", "m", "--api-key", "sk-1"], ["vllm", "serve", "m", "--api-key", MASK]),
        (["vllm", "serve", "--api-key=sk-1", "m"], ["vllm", "serve", f"--api-key={MASK}", "m"]),
        (["--hf-token", "hf_abc", "--port", "8000"], ["--hf-token", MASK, "--port", "8000"]),
        # `--api-key` takes several values (a list in vLLM): each is masked, up to the next flag
        (["--api-key", "k1", "k2", "--port", "1"], ["--api-key", MASK, MASK, "--port", "1"]),
        (["--api-key"], ["--api-key"]),
        (["--api-keys", "not-a-secret"], ["--api-keys", "not-a-secret"]),
        (["--model", "sk-looks-like-a-key"], ["--model", "sk-looks-like-a-key"]),
    ],
)
def test_secret_flag_values_are_masked_and_the_flag_stays_visible(argv: list[str], shown: list[str]) -> None:
    assert redact_argv(argv) == shown


def test_redacting_argv_leaves_the_original_alone() -> None:
    argv = ["--api-key", "sk-1"]
    redact_argv(argv)
    assert argv == ["--api-key", "sk-1"]


def test_the_secret_variables_of_an_environment_are_masked_and_listed() -> None:
    env = {
        "VLLM_API_KEY": "sk-live-123",
        "HF_TOKEN": "hf_",
        "HUGGING_FACE_HUB_TOKEN": "hf_long_token",
        "PATH": "/bin",
    }
    assert redact_env(env) == {
        "VLLM_API_KEY": MASK, "HF_TOKEN": MASK, "HUGGING_FACE_HUB_TOKEN": MASK, "PATH": "/bin",
    }  # fmt: skip
    assert secret_values(env) == ("sk-live-123", "hf_long_token"), "4 characters or more: shorter is text"


def test_a_known_secret_is_masked_wherever_it_appears_in_a_line() -> None:
    redact = LineRedactor(["sk-live-123", "abc"])
    assert redact("request refused: key sk-live-123 unknown") == f"request refused: key {MASK} unknown"
    assert redact("abc is short and stays") == "abc is short and stays"


def test_the_longest_secret_is_masked_first_so_no_tail_of_it_shows() -> None:
    redact = LineRedactor(["secret", "secret-and-more"])
    assert redact("x secret-and-more y") == f"x {MASK} y"


def test_vllms_non_default_args_line_loses_its_key_and_token() -> None:
    line = (
        "INFO 12-01 10:00:00 [api_utils.py:273] non-default args: "
        "{'model': 'm', 'api_key': ['sk-1', 'sk-2'], 'hf_token': 'hf_x', 'port': 8001}"
    )
    masked = LineRedactor()(line)
    assert masked.endswith(f"{{'model': 'm', 'api_key': '{MASK}', 'hf_token': '{MASK}', 'port': 8001}}")
    assert "sk-1" not in masked and "hf_x" not in masked


def test_a_command_line_in_a_log_loses_its_key_but_a_masked_one_is_left_as_is() -> None:
    redact = LineRedactor()
    assert (
        redact("started: vllm serve m --api-key sk-9 --port 1")
        == f"started: vllm serve m --api-key {MASK} --port 1"
    )
    assert redact("started: vllm serve m --hf-token=hf_9") == f"started: vllm serve m --hf-token={MASK}"
    assert redact(f"started: vllm serve m --api-key {MASK}") == f"started: vllm serve m --api-key {MASK}"


def test_a_line_without_a_secret_is_unchanged() -> None:
    line = "INFO non-default args: {'model': 'm', 'max_num_seqs': 8}"
    assert LineRedactor(["sk-live-123"])(line) == line


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_API_KEY",
        "HF_TOKEN",
        "hf_token",
        "--api-key",
        "env.DB_PASSWORD",
        "MY_SECRET_X",
        "key",
        "OPENAI_API_KEY",
    ],
)
def test_a_name_that_says_it_holds_a_secret_is_one(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["PATH", "--api-keys", "max_num_seqs", "TOKENIZERS_PARALLELISM", "api_key_env", "--model", "KEYBOARD"],
)
def test_other_names_are_not(name: str) -> None:
    assert not is_secret_name(name)


def test_the_variable_api_key_env_names_is_a_secret_once_noted() -> None:
    assert not is_secret_name("SERVE_CRED_FOR_REDACT_TEST")
    note_secret_name("SERVE_CRED_FOR_REDACT_TEST")
    assert is_secret_name("env.SERVE_CRED_FOR_REDACT_TEST")
    assert redact_env({"SERVE_CRED_FOR_REDACT_TEST": "abcdef"}) == {"SERVE_CRED_FOR_REDACT_TEST": MASK}


def test_a_secret_assigned_on_a_command_line_is_masked_and_known() -> None:
    """`launch set --profile w env.VLLM_API_KEY=sk-… --dry-run`: the bug report's `command:` line held
    the key (issue 42)."""
    argv = [
        "launch",
        "set",
        "--profile",
        "w",
        "env.VLLM_API_KEY=sk-live-123",
        'hf_token="hf_abcd"',
        "max_num_seqs=8",
    ]
    assert redact_argv(argv) == ["launch", "set", "--profile", "w", f"env.VLLM_API_KEY={MASK}", f"hf_token={MASK}",
                                 "max_num_seqs=8"]  # fmt: skip
    assert set(assigned_secrets(argv)) == {"sk-live-123", '"hf_abcd"', "hf_abcd"}
    assert redact_argv(["--db-password", "pw-1234", "--port", "1"]) == ["--db-password", MASK, "--port", "1"]


def test_the_secrets_of_a_profiles_tables_are_found_at_any_depth() -> None:
    data = {
        "env": {"VLLM_API_KEY": "sk-live-123", "PATH": "/usr/bin", "SHORT_TOKEN": "abc"},
        "args": {"max_num_seqs": 8, "x": {"hf_token": ["hf_1234", "hf_5678"]}},
        "engine": {"api_key_env": "NOT_A_SECRET_ITSELF"},
    }
    assert sorted(secrets_in(data)) == ["hf_1234", "hf_5678", "sk-live-123"]
