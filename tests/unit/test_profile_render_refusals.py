"""What `launcher/profile/render.py` refuses or adds, against vLLM 0.33.0's real option schema (the
committed snapshot): a value of the wrong shape for its flag, a switch that cannot be turned off, what
a fork's unknown flags become, and what parking asleep adds to the launch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.profile.findings import Findings
from launcher.profile.loader import resolve
from launcher.profile.render import Rendered, render
from vllm_flags.schema import load_snapshot

SCHEMA = load_snapshot()


def rendered(profiles_dir: Path, body: str, *, lenient: bool = False) -> tuple[Rendered, Findings]:
    (profiles_dir / "p.toml").write_text('[engine]\nmodel = "Qwen/Qwen3-8B"\n' + body, encoding="utf-8")
    findings = Findings()
    return render(resolve(profiles_dir, "p"), SCHEMA, findings, lenient=lenient), findings


def args_of(result: Rendered) -> tuple[str, ...]:
    """The tokens after the engine's own name/host/port flags."""
    argv = result.argv
    return argv[argv.index("--port") + 2 :]


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            "compilation_config = 3",
            "args.compilation_config = 3: --compilation-config takes JSON (write a table)",
        ),
        ("max_num_seqs = [8, 16]", "args.max_num_seqs = [8, 16]: --max-num-seqs takes one value, not a list"),
        ("kv_cache_dtype = { a = 1 }", "args.kv_cache_dtype: --kv-cache-dtype does not take a table"),
        (
            'cudagraph_capture_sizes = [1, 2, "4"]',
            "args.cudagraph_capture_sizes = '4': --cudagraph-capture-sizes takes an integer",
        ),  # fmt: skip
        ("max_num_seqs = true", "args.max_num_seqs = True: --max-num-seqs takes an integer"),
        (
            'gpu_memory_utilization = "0.9"',
            "args.gpu_memory_utilization = '0.9': --gpu-memory-utilization takes a number",
        ),  # fmt: skip
        (
            "max_model_len = 1.5",
            "args.max_model_len = 1.5: --max-model-len takes an integer or a size like 32k",
        ),
        ("kv_cache_dtype = 8", "args.kv_cache_dtype = 8: --kv-cache-dtype takes a string"),
        (
            'enforce_eager = "yes"',
            "args.enforce_eager = 'yes': --enforce-eager is a switch, write true or false",
        ),
    ],
)
def test_a_value_of_the_wrong_shape_for_its_flag_is_an_error_naming_both(
    profiles_dir: Path, line: str, error: str
) -> None:
    result, findings = rendered(profiles_dir, f"[args]\n{line}\n")
    assert len(findings.errors) == 1 and findings.errors[0].endswith(error), findings.errors
    assert args_of(result) == ()  # the bad key renders nothing


def test_an_error_names_the_file_and_line_it_came_from(profiles_dir: Path) -> None:
    _, findings = rendered(profiles_dir, "[args]\nmax_num_seqs = [8, 16]\n")
    assert findings.errors[0].startswith(str(profiles_dir / "p.toml"))


def test_json_flags_take_a_table_a_list_or_json_text_as_written(profiles_dir: Path) -> None:
    body = (
        "[args]\n"
        'speculative_config = { method = "ngram", num_speculative_tokens = 2 }\n'
        "default_chat_template_kwargs = '{\"enable_thinking\": false}'\n"
        'compilation_config = { cudagraph_capture_sizes = [1, 2, 4], mode = "é" }\n'
    )
    result, findings = rendered(profiles_dir, body)
    assert findings.items == []
    assert args_of(result) == (
        "--compilation-config", '{"cudagraph_capture_sizes":[1,2,4],"mode":"é"}',
        "--default-chat-template-kwargs", '{"enable_thinking": false}',
        "--speculative-config", '{"method":"ngram","num_speculative_tokens":2}',
    )  # fmt: skip


def test_switches_render_bare_or_as_their_no_form(profiles_dir: Path) -> None:
    result, findings = rendered(profiles_dir, "[args]\nenforce_eager = true\nenable_prefix_caching = false\n")
    assert findings.items == []
    assert args_of(result) == ("--enforce-eager", "--no-enable-prefix-caching")


def test_a_switch_vllm_cannot_turn_off_is_left_out_with_a_warning(profiles_dir: Path) -> None:
    result, findings = rendered(profiles_dir, "[args]\ndisable_log_stats = false\n")
    assert args_of(result) == () and findings.errors == []
    assert findings.warnings[0].endswith(
        "args.disable_log_stats = False: vLLM has no inverse of --disable-log-stats; left out (its default)"
    )


def test_a_forks_unknown_flags_render_by_their_value_when_lenient(profiles_dir: Path) -> None:
    body = (
        "[args]\nfork_on = true\nfork_off = false\nfork_table = { a = [1, 2] }\nfork_list = [1, 2.5, true]\n"
    )
    result, findings = rendered(profiles_dir, body, lenient=True)
    assert findings.errors == [] and len(findings.warnings) == 4
    assert args_of(result) == (
        "--fork-list", "1", "2.5", "true",
        "--fork-on",
        "--fork-table", '{"a":[1,2]}',
        "--no-fork-off",
    )  # fmt: skip


def test_an_unknown_flag_names_the_vllm_version_and_the_nearest_key(profiles_dir: Path) -> None:
    _, findings = rendered(profiles_dir, "[args]\nmax_num_seq = 8\n")
    assert findings.errors[0].endswith(
        "args.max_num_seq: vLLM 0.33.0 has no flag --max-num-seq; did you mean max_num_seqs?"
    )


def test_parking_asleep_adds_sleep_mode_and_the_dev_routes_once(profiles_dir: Path) -> None:
    """vLLM registers /sleep and /wake_up only with VLLM_SERVER_DEV_MODE=1 (0.26.0 entrypoints/serve)."""
    result, findings = rendered(
        profiles_dir, '[supervisor]\npark = "sleep"\n[env]\nZ_LAST = "1"\nA_FIRST = "1"\n'
    )
    assert findings.errors == []
    assert args_of(result) == ("--enable-sleep-mode",)
    assert list(result.env) == ["A_FIRST", "VLLM_SERVER_DEV_MODE", "Z_LAST"]
    assert result.env["VLLM_SERVER_DEV_MODE"] == "1"
    again, _ = rendered(profiles_dir, '[supervisor]\npark = "sleep"\n[args]\nenable_sleep_mode = true\n')
    assert args_of(again).count("--enable-sleep-mode") == 1


def test_parking_by_stopping_adds_nothing(profiles_dir: Path) -> None:
    result, _ = rendered(profiles_dir, '[supervisor]\npark = "stop"\n')
    assert args_of(result) == () and "VLLM_SERVER_DEV_MODE" not in result.env


def test_args_are_sorted_by_flag_not_by_key(profiles_dir: Path) -> None:
    """`tensor_parallel_size` renders `--tensor-parallel-size`; `enable_prefix_caching = false` sorts as
    `--no-enable-prefix-caching`, after `--max-num-seqs`."""
    body = "[args]\ntensor_parallel_size = 2\nenable_prefix_caching = false\nmax_num_seqs = 8\n"
    result, _ = rendered(profiles_dir, body)
    assert args_of(result) == (
        "--max-num-seqs",
        "8",
        "--no-enable-prefix-caching",
        "--tensor-parallel-size",
        "2",
    )


@pytest.mark.parametrize(
    ("line", "engine_key", "option"),
    [
        ('host = "0.0.0.0"', "host", "--host"),
        ("port = 9000", "port", "--port"),
        ('model = "other"', "model", "--model"),
        ('served_model_name = "other"', "served_model_name", "--served-model-name"),
        ('served-model-name = ["a", "b"]', "served_model_name", "--served-model-name"),
    ],
)
def test_an_args_key_that_the_engine_table_renders_is_refused(
    profiles_dir: Path, line: str, engine_key: str, option: str
) -> None:
    """Was: `[args] host = "0.0.0.0"` beside `[engine] host` rendered `--host` twice and vLLM kept the
    last, listening on every address while the launcher went by engine.host (issue 42)."""
    result, findings = rendered(profiles_dir, f"[args]\n{line}\nmax_num_seqs = 4\n")
    key = line.partition(" =")[0].replace("-", "_")  # the loader reads args keys in snake_case
    assert len(findings.errors) == 1, findings.errors
    assert f"args.{key} = " in findings.errors[0]
    assert f"is vLLM's {option}, which the launcher renders from engine.{engine_key}" in findings.errors[0]
    assert result.argv.count(option) == (1 if engine_key in ("host", "port") else 0)
    assert args_of(result) == ("--max-num-seqs", "4")


@pytest.mark.parametrize("lenient", [False, True])
def test_an_abbreviation_of_an_engine_flag_is_refused_too(profiles_dir: Path, lenient: bool) -> None:
    """vLLM's argparse expands `--hos` to `--host` (vllm-facts.md §9): a fork's unknown flags are let
    through with `schema = "none"`, this one never is."""
    result, findings = rendered(profiles_dir, '[args]\nhos = "0.0.0.0"\n', lenient=lenient)
    assert findings.errors == [
        f"{profiles_dir / 'p.toml'}: args.hos = '0.0.0.0' is vLLM's --host, which the launcher renders from "
        "engine.host ('127.0.0.1'): vLLM would get both and keep one, while the launcher goes by engine.host; "
        "set engine.host only"
    ]
    assert result.argv.count("--host") == 1 and "--hos" not in result.argv


def test_a_literal_api_key_in_args_is_refused_once(profiles_dir: Path) -> None:
    for line in ('api_key = "sk-1"', 'api-key = ["sk-1"]'):
        result, findings = rendered(profiles_dir, f"[args]\n{line}\n")
        assert findings.errors == [
            f"{profiles_dir / 'p.toml'}: args.api_key: a literal API key in a profile; "
            "set engine.api_key_env to a variable NAME"
        ]
        assert "sk-1" not in " ".join(result.argv)
