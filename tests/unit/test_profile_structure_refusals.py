"""Every shape refusal of `launcher/profile/structure.py`, one profile each: the error names the file
and key, says what was expected, and no other key is blamed.

Three of them are reported twice today, once by the key's declaration (`must be ≥ 1`, `item 1 (1) must
be a str`, `must be one of log, restart, rollback`) and once by check_structure's own older check: the
tests ask for the latter and blame no other key, so they hold whether or not the echo is removed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.profile.findings import Findings
from launcher.profile.loader import resolve
from launcher.profile.structure import check_structure, has_control

MODEL = '[engine]\nmodel = "Qwen/Qwen3-8B"\n'


def errors(profiles_dir: Path, body: str) -> list[str]:
    path = profiles_dir / "p.toml"
    path.write_text(body, encoding="utf-8")
    findings = Findings()
    check_structure(resolve(profiles_dir, "p"), findings)
    return [e.removeprefix(f"{path}:").lstrip("0123456789: ") for e in findings.errors]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("[engine]\nport = 8000\n", "engine.model is required (vLLM's positional MODEL)"),
        (MODEL + "port = 0\n", "engine.port = 0: must be ≥ 1"),
        (MODEL + "port = 65536\n", "engine.port = 65536: must be ≤ 65_535"),
        (MODEL + "command = []\n", "engine.command: a non-empty list of strings"),
        (MODEL + 'command = ["vllm", 1]\n', "engine.command = ['vllm', 1]: item 1 (1) must be a str"),
        (
            MODEL + 'api_key_env = "MY-KEY"\n',
            "engine.api_key_env = 'MY-KEY': an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
        ),  # fmt: skip
        (MODEL + 'modle = "x"\n', "engine.modle: unknown key; did you mean model?"),
        (
            MODEL + '[supervisor]\nleak_monitor = "page"\n',
            "supervisor.leak_monitor = 'page': must be one of log, restart, rollback",
        ),  # fmt: skip
        (MODEL + "[supervisor]\nstall_s = 0.1\n", "supervisor.stall_s = 0.1: must be ≥ 0.5"),
        (
            MODEL + '[supervisor]\nwarm_weights_timeout_s = "x"\n',
            "supervisor.warm_weights_timeout_s = 'x': expected int or float",
        ),  # fmt: skip
        (MODEL + '[env]\n"1BAD" = "x"\n', "env.1BAD: not a valid environment variable name"),
        (MODEL + "[env]\nFLAG = true\n", "env.FLAG = True: environment values are strings"),
        (
            MODEL + '[env]\nHF_HOME = "/data\\n/x"\n',
            "env.HF_HOME = '/data\\n/x': contains a control character",
        ),
        (
            MODEL + '[args]\nserved_model_name = ["a\\u0000b"]\n',
            "args.served_model_name: contains a control character",
        ),  # fmt: skip
        (
            MODEL + '[args]\nspeculative_config = { "met\\u001bhod" = "ngram" }\n',
            "args.speculative_config: contains a control character",
        ),  # fmt: skip
        (MODEL + '[gates]\norder = "health"\n', "gates.order: a list of gate names"),
        (MODEL + '[gates]\norder = ["helth"]\n', "gates.order: no gate named 'helth'; did you mean health?"),
        (MODEL + '[gates]\norder = ["health", "health"]\n', "gates.order: gate 'health' is listed 2 times"),
        (
            MODEL + '[gates]\norder = ["health"]\n[gates.helth]\nrequired = true\n',
            "gates.helth: no gate named 'helth'; did you mean health?",
        ),  # fmt: skip
        (MODEL + '[gates]\norder = ["health"]\nhealth = 3\n', "gates.health: must be a table [gates.health]"),
        (
            MODEL + '[gates]\norder = ["health", "memory_leak"]\n[gates.memory_leak]\nwindows = 3\n',
            "gates.memory_leak: windows = 3 is too few: baseline_window + consecutive = 5",
        ),  # fmt: skip
    ],
)
def test_each_shape_refusal_names_the_key_and_what_it_expects(
    profiles_dir: Path, body: str, error: str
) -> None:
    found = errors(profiles_dir, body)
    assert error in found, found
    key = error.split(" ", 1)[0].split(":", 1)[0]
    assert all(e.startswith(key) for e in found), found  # no other key blamed


def test_an_abstract_profile_needs_no_model_and_no_required_gate(profiles_dir: Path) -> None:
    body = 'abstract = true\n[gates]\norder = ["health"]\n[gates.health]\nrequired = false\n'
    assert errors(profiles_dir, body) == []


@pytest.mark.parametrize(
    "gates",
    ["[gates]\norder = []\n", '[gates]\norder = ["health"]\n[gates.health]\nrequired = false\n'],
)
def test_a_chain_without_a_required_gate_is_refused(profiles_dir: Path, gates: str) -> None:
    """`gates.order = []` once promoted a candidate with no gate at all."""
    (error,) = errors(profiles_dir, MODEL + gates)
    assert error.startswith("gates: the chain ") and error.endswith(
        "has no required gate, so any candidate would be promoted (add a gate to gates.order, or set "
        "required = true)"
    )


def test_the_default_chain_has_required_gates(profiles_dir: Path) -> None:
    assert errors(profiles_dir, MODEL) == []


def test_an_error_names_the_file_where_the_key_is(profiles_dir: Path) -> None:
    (profiles_dir / "p.toml").write_text(MODEL + "port = 0\n", encoding="utf-8")
    findings = Findings()
    check_structure(resolve(profiles_dir, "p"), findings)
    assert f"{profiles_dir / 'p.toml'}: engine.port = 0: must be ≥ 1" in findings.errors


def test_a_value_set_in_the_parent_is_reported_at_the_parent(profiles_dir: Path) -> None:
    (profiles_dir / "base.toml").write_text("abstract = true\n[engine]\nport = 70000\n", encoding="utf-8")
    (profiles_dir / "p.toml").write_text('extends = "base"\n' + MODEL, encoding="utf-8")
    findings = Findings()
    check_structure(resolve(profiles_dir, "p"), findings)
    assert f"{profiles_dir / 'base.toml'}: engine.port = 70000: must be ≤ 65_535" in findings.errors
    assert not any(str(profiles_dir / "p.toml") in e for e in findings.errors)


@pytest.mark.parametrize(
    ("text", "control"),
    [
        ("plain text", False),
        ("tab\there", True),
        ("nul\x00", True),
        ("del\x7f", True),
        ("é ü 中", False),
        ("", False),
    ],
)
def test_a_control_character_is_below_space_or_del(text: str, control: bool) -> None:
    assert has_control(text) is control
