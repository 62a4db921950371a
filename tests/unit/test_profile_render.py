"""Rendering rules: bools and --no- forms, tables → compact JSON, lists, order, determinism."""

from __future__ import annotations

from pathlib import Path

from launcher.profile.findings import Findings
from launcher.profile.loader import resolve
from launcher.profile.render import render
from vllm_flags.schema import VllmSchema


def _schema() -> VllmSchema:
    """A small schema in the snapshot format: rendering rules do not depend on vLLM's flag list."""
    options: dict[str, dict[str, object]] = {}

    def value(option: str, kind: str, nargs: str | None = None, choices: list[str] | None = None) -> None:
        dest = option[2:].replace("-", "_")
        options[option] = {"dest": dest, "kind": "value", "type": kind, "nargs": nargs, "choices": choices}

    def switch(option: str, inverse: str | None) -> None:
        dest = option[2:].replace("-", "_")
        options[option] = {"dest": dest, "kind": "flag", "sets": True}
        if inverse:
            options[inverse] = {"dest": dest, "kind": "flag", "sets": False}

    value("--max-num-seqs", "int")
    value("--gpu-memory-utilization", "float")
    value("--compilation-config", "json")
    value("--cudagraph-capture-sizes", "int", nargs="+")
    value("--served-model-name", "str", nargs="+")
    value("--max-model-len", "human_int")
    value("--load-format", "str", choices=["auto", "gguf"])
    switch("--enable-prefix-caching", "--no-enable-prefix-caching")
    options["--disable-prefix-caching"] = {"dest": "enable_prefix_caching", "kind": "flag", "sets": False}
    switch("--trust-remote-code", None)
    return VllmSchema.from_json({"vllm_version": "test", "options": options}, origin="test")


def _render(profiles_dir: Path, body: str, lenient: bool = False) -> tuple[tuple[str, ...], Findings]:
    (profiles_dir / "p.toml").write_text('[engine]\nmodel = "m"\n' + body)
    findings = Findings()
    rendered = render(resolve(profiles_dir, "p"), _schema(), findings, lenient=lenient)
    return rendered.argv, findings


def test_true_is_a_bare_flag_and_false_the_no_form(profiles_dir: Path) -> None:
    argv, findings = _render(
        profiles_dir, "[args]\nenable_prefix_caching = false\ntrust-remote-code = true\n"
    )
    assert "--no-enable-prefix-caching" in argv
    assert "--trust-remote-code" in argv
    assert findings.items == []


def test_false_without_an_inverse_is_left_out_with_a_warning(profiles_dir: Path) -> None:
    argv, findings = _render(profiles_dir, "[args]\ntrust_remote_code = false\n")
    assert not any("trust" in token for token in argv)
    assert findings.errors == [] and "no inverse" in findings.warnings[0]


def test_table_renders_as_compact_json_and_lists_as_tokens(profiles_dir: Path) -> None:
    body = "[args]\ncompilation_config = { cudagraph_capture_sizes = [1, 2, 4] }\ncudagraph_capture_sizes = [1, 2]\n"
    argv, _ = _render(profiles_dir, body)
    at = argv.index("--compilation-config")
    assert argv[at + 1] == '{"cudagraph_capture_sizes":[1,2,4]}'
    at = argv.index("--cudagraph-capture-sizes")
    assert argv[at + 1 : at + 3] == ("1", "2")


def test_order_is_command_model_engine_flags_then_sorted_args(profiles_dir: Path) -> None:
    body = "[args]\nmax_num_seqs = 8\ngpu_memory_utilization = 0.3\n"
    argv, _ = _render(profiles_dir, body)
    assert argv[:3] == ("vllm", "serve", "m")
    assert argv[3:7] == ("--host", "127.0.0.1", "--port", "8000")
    assert argv[7:] == ("--gpu-memory-utilization", "0.3", "--max-num-seqs", "8")


def test_same_profile_renders_byte_identical_argv(profiles_dir: Path) -> None:
    body = (
        "[args]\nmax_num_seqs = 8\ncompilation_config = { b = 1, a = [2, 1] }\nenable_prefix_caching = true\n"
    )
    first, _ = _render(profiles_dir, body)
    second, _ = _render(profiles_dir, body)
    assert first == second


def test_wrong_type_unknown_flag_and_bad_choice_are_errors(profiles_dir: Path) -> None:
    body = '[args]\nmax_num_seqs = "32"\nmax_num_seq = 4\nload_format = "ggml"\nenable_prefix_caching = 1\n'
    _, findings = _render(profiles_dir, body)
    text = "\n".join(findings.errors)
    assert "max_num_seqs = '32'" in text and "takes an integer" in text
    assert "no flag --max-num-seq" in text and "did you mean max_num_seqs?" in text
    assert "not one of vLLM's choices" in text
    assert "is a switch" in text
    assert len(findings.errors) == 4


def test_unknown_flag_is_a_warning_when_lenient(profiles_dir: Path) -> None:
    argv, findings = _render(profiles_dir, "[args]\nfork_only_flag = 3\n", lenient=True)
    assert argv[-2:] == ("--fork-only-flag", "3")
    assert findings.errors == [] and "no flag --fork-only-flag" in findings.warnings[0]


def test_human_int_accepts_sizes_and_floats_keep_short_form(profiles_dir: Path) -> None:
    argv, findings = _render(profiles_dir, '[args]\nmax_model_len = "32k"\ngpu_memory_utilization = 0.1\n')
    assert findings.items == []
    assert "32k" in argv and "0.1" in argv


def test_served_model_names_and_api_key_env(profiles_dir: Path) -> None:
    (profiles_dir / "p.toml").write_text(
        '[engine]\nmodel = "m"\nserved_model_name = ["a", "b"]\napi_key_env = "MY_KEY"\nport = 9001\n'
    )
    rendered = render(resolve(profiles_dir, "p"), _schema(), Findings(), lenient=False)
    assert rendered.argv[3:6] == ("--served-model-name", "a", "b")
    assert "9001" in rendered.argv
    assert rendered.secret_env == {"VLLM_API_KEY": "MY_KEY"}
    assert not any("MY_KEY" in token for token in rendered.argv)
