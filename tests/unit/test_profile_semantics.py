"""What a profile's flags mean together (launcher/profile/semantics.py): the errors that stop a start
and the warnings about CUDA graphs vLLM would capture differently from what the profile says."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.profile.findings import Findings
from launcher.profile.loader import resolve
from launcher.profile.semantics import (
    capture_config,
    capture_size_warnings,
    check_semantics,
    human_int,
    is_loopback,
)


def findings_of(profiles_dir: Path, args: str, env: str = "") -> Findings:
    (profiles_dir / "p.toml").write_text(f'[engine]\nmodel = "m"\n[args]\n{args}\n{env}')
    found = Findings()
    check_semantics(resolve(profiles_dir, "p"), found)
    return found


def test_a_plain_profile_has_nothing_to_say(profiles_dir: Path) -> None:
    found = findings_of(profiles_dir, "max_num_seqs = 16\ngpu_memory_utilization = 0.9")
    assert found.items == []


@pytest.mark.parametrize("util", ["0", "1.5", "-0.2"])
def test_gpu_memory_utilization_is_a_fraction_of_the_gpu(profiles_dir: Path, util: str) -> None:
    found = findings_of(profiles_dir, f"gpu_memory_utilization = {util}")
    shown = float(util) if "." in util else int(util)  # as TOML read it
    assert found.errors == [
        f"{profiles_dir / 'p.toml'}: args.gpu_memory_utilization = {shown}: "
        "must be in (0, 1] (a fraction of GPU memory)"
    ]


def test_one_is_the_whole_gpu_and_allowed(profiles_dir: Path) -> None:
    assert findings_of(profiles_dir, "gpu_memory_utilization = 1").errors == []


def test_flags_that_blind_the_gates_are_refused_where_they_are(profiles_dir: Path) -> None:
    """(A literal `api_key` is the renderer's refusal: tests/unit/test_profile_render_refusals.py.)"""
    found = findings_of(profiles_dir, "disable-log-stats = true")
    assert found.errors == [
        f"{profiles_dir / 'p.toml'}: args.disable_log_stats: refused — it removes vLLM's /metrics (vllm:*) "
        "and stats lines, which the gates need"
    ]
    assert findings_of(profiles_dir, "disable_log_stats = false").errors == []


def test_an_inherited_value_is_blamed_on_the_file_that_set_it(profiles_dir: Path) -> None:
    (profiles_dir / "base.toml").write_text('[engine]\nmodel = "m"\n[args]\ndisable_log_stats = true\n')
    (profiles_dir / "child.toml").write_text('extends = "base"\n[args]\nmax_num_seqs = 8\n')
    found = Findings()
    check_semantics(resolve(profiles_dir, "child"), found)
    assert found.errors[0].startswith(f"{profiles_dir / 'base.toml'}: args.disable_log_stats")


def test_capture_sizes_beyond_the_token_budget_are_dropped_by_vllm(profiles_dir: Path) -> None:
    found = findings_of(
        profiles_dir,
        "max_num_batched_tokens = 16\nmax_num_seqs = 64\ncudagraph_capture_sizes = [1, 8, 32, 64]",
    )
    assert found.warnings == [
        f"{profiles_dir / 'p.toml'}: args.cudagraph_capture_sizes: capture sizes [32, 64] exceed "
        "max_num_batched_tokens=16; vLLM drops them"
    ]


def test_capture_sizes_no_decode_batch_reaches_are_never_used(profiles_dir: Path) -> None:
    found = findings_of(
        profiles_dir, "max_num_seqs = 4\ncompilation_config = { cudagraph_capture_sizes = [1, 2, 4, 16] }"
    )
    assert found.warnings == [
        f"{profiles_dir / 'p.toml'}: args.compilation_config: capture sizes [16] are never used — a decode "
        "batch holds at most max_num_seqs × 1 = 4 tokens"
    ]


def test_speculative_decoding_rounds_the_v1_runners_sizes_and_says_what_it_will_capture(
    profiles_dir: Path,
) -> None:
    args = (
        "max_num_seqs = 2\n"
        'speculative_config = { method = "ngram", num_speculative_tokens = 2, prompt_lookup_max = 3 }\n'
        "compilation_config = { cudagraph_capture_sizes = [1, 2, 4, 8] }"
    )
    found = findings_of(profiles_dir, args)
    rounding = next(w for w in found.warnings if "rounds capture sizes" in w)
    assert "V1 model runner rounds capture sizes up to multiples of 3 (every size)" in rounding
    assert "from the sizes [1, 2, 4, 8]" in rounding and "[3, 6]" in rounding


def test_graphs_below_the_decode_batch_warn_that_decode_runs_eager(profiles_dir: Path) -> None:
    """vLLM 0.26.0 with ngram k=2 and sizes [1, 2, 4, 8] captured [3, 6]: beyond 2 sequences no graph."""
    args = (
        "max_num_seqs = 8\n"
        'speculative_config = { method = "ngram", num_speculative_tokens = 2 }\n'
        "compilation_config = { cudagraph_capture_sizes = [1, 2, 4, 8] }"
    )
    found = findings_of(profiles_dir, args)
    ceiling = next(w for w in found.warnings if "decode runs without" in w)
    assert ceiling.startswith(
        f"{profiles_dir / 'p.toml'}: args.speculative_config: with 2 speculative token(s)"
    )
    assert ceiling.endswith(
        "at most 2 sequence(s) (6 tokens): above 2 sequences decode runs without CUDA graphs "
        "(max_num_seqs = 8)"
    )


def test_without_max_num_seqs_the_ceiling_is_judged_against_vllms_default(profiles_dir: Path) -> None:
    spec = 'speculative_config = { method = "ngram", num_speculative_tokens = 2 }'
    args = f"{spec}\ncudagraph_capture_sizes = [1, 2]"
    found = findings_of(profiles_dir, args)
    assert any("vLLM's default max_num_seqs, ≥ 256 on a GPU" in w for w in found.warnings)


def test_eager_with_capture_sizes_is_contradictory_and_nothing_else_is_judged(profiles_dir: Path) -> None:
    found = findings_of(
        profiles_dir, "enforce_eager = true\nmax_num_batched_tokens = 1\ncudagraph_capture_sizes = [4]"
    )
    assert len(found.items) == 1 and "contradictory; drop one" in found.errors[0]
    assert findings_of(profiles_dir, "enforce_eager = true").items == []


def test_malformed_values_are_left_to_the_renderer(profiles_dir: Path) -> None:
    found = findings_of(profiles_dir, 'cudagraph_capture_sizes = ["a", "b"]')
    assert found.items == []


def test_the_capture_config_reads_tables_json_strings_and_dashes() -> None:
    config = capture_config(
        {
            "max-num-seqs": "16k",
            "compilation-config": '{"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 4,'
            ' "cudagraph_mode": "PIECEWISE"}',
            "speculative_config": {"model": "ngram", "num_speculative_tokens": 3},
        },
        {"VLLM_USE_V2_MODEL_RUNNER": "1"},
    )
    assert (config.sizes, config.max_capture_size, config.max_num_seqs) == ((1, 2, 4), 4, 16000)
    assert (config.num_speculative_tokens, config.spec_method, config.cudagraph_mode) == (
        3,
        "ngram",
        "PIECEWISE",
    )
    assert config.runner == "V2" and config.model_runner == "V2" and config.decode_query_len == 4


def test_the_drafting_method_picks_the_runner_unless_the_environment_forces_one() -> None:
    assert (
        capture_config({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}).model_runner
        == "V2"
    )
    ngram = capture_config({"speculative_config": {"method": "ngram", "num_speculative_tokens": 1}})
    assert ngram.model_runner == "V1" and ngram.runner is None
    forced = capture_config({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}},
                            {"VLLM_USE_V2_MODEL_RUNNER": "0"})  # fmt: skip
    assert forced.model_runner == "V1"
    assert capture_config({"compilation_config": "not json"}).sizes is None
    assert capture_config({"enforce_eager": "true"}).enforce_eager is False, "only the TOML boolean true"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (16384, 16384), ("16k", 16000), ("16K", 16384), ("1m", 1_000_000), ("2M", 2 * 1024**2),
        ("1g", 10**9), (" 512 ", 512), ("1.5k", 1500), ("sixteen", None), ("k", None), ("", None),
        (True, None), (None, None), (3.5, None), ("12x", None),
    ],
)  # fmt: skip
def test_human_ints_read_as_vllm_reads_them(value: object, expected: int | None) -> None:
    assert human_int(value) == expected


def test_capture_size_warnings_say_what_vllm_does_to_the_sizes_asked_for() -> None:
    def warnings(**args: object) -> list[str]:
        config = capture_config(args)
        assert config.sizes is not None
        return capture_size_warnings(config, config.sizes)

    assert warnings(cudagraph_capture_sizes=[4, 2, 1, 2]) == []
    assert warnings(cudagraph_capture_sizes=[1, 2, 4, 8, 64], max_num_batched_tokens=32, max_num_seqs=2) == [
        "capture sizes [64] exceed max_num_batched_tokens=32; vLLM drops them",
        "capture sizes [4, 8] are never used — a decode batch holds at most max_num_seqs × 1 = 2 tokens",
    ]
    spec = {"method": "ngram", "num_speculative_tokens": 2}
    (rounded,) = warnings(cudagraph_capture_sizes=[1, 2, 4, 8], speculative_config=spec, max_num_seqs=8)
    assert rounded.startswith("with 2 speculative token(s) the V1 model runner rounds capture sizes up to")
    assert rounded.endswith("PIECEWISE [3, 6] (2 graphs), FULL [3, 6] (2 graphs) from the sizes [1, 2, 4, 8]")
    assert warnings(cudagraph_capture_sizes=[3, 6], speculative_config=spec, max_num_seqs=2) == []


# ---- park = "sleep": the dev-mode routes only on loopback ------------------------------------------


def park_findings(profiles_dir: Path, engine: str = "", supervisor: str = "", rest: str = "") -> Findings:
    """A profile that parks asleep on park_port 8001 unless `supervisor` says otherwise."""
    (profiles_dir / "p.toml").write_text(
        f'[engine]\nmodel = "m"\n{engine}\n[supervisor]\npark = "sleep"\n{supervisor or "park_port = 8001"}\n'
        f"{rest}"
    )
    found = Findings()
    check_semantics(resolve(profiles_dir, "p"), found)
    return found


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.255.255.254", "localhost", "::1"])
def test_a_loopback_address_may_park_asleep(profiles_dir: Path, host: str) -> None:
    assert park_findings(profiles_dir, f'host = "{host}"').errors == []


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "::", "10.0.0.5", "192.168.1.20", "gpu-01.lan", "127.evil.example", "127.0.0.1.nip.io"],
)
def test_any_other_address_or_a_host_name_that_only_looks_like_loopback_is_refused(
    profiles_dir: Path, host: str
) -> None:
    """A name such as `127.evil.example` resolves wherever its DNS says: it is not loopback, and the
    unauthenticated sleep routes would be reachable from wherever that is."""
    (error,) = park_findings(profiles_dir, f'host = "{host}"').errors
    assert error.startswith(
        f'{profiles_dir / "p.toml"}: supervisor.park = "sleep" with engine.host = {host!r}'
    )
    assert is_loopback(host) is False


def test_parking_needs_a_second_port_that_is_an_integer_other_than_the_engines(profiles_dir: Path) -> None:
    missing = park_findings(profiles_dir, supervisor="stop_grace_s = 5")
    assert [e for e in missing.errors if "needs supervisor.park_port" in e] != []
    same = park_findings(profiles_dir, "port = 8123", supervisor="park_port = 8123")
    assert same.errors == ["supervisor.park_port = 8123 is engine.port: the two must differ"]
    # the default engine.port is 8000: a park_port of 8000 collides with it
    assert park_findings(profiles_dir, supervisor="park_port = 8000").errors == [
        "supervisor.park_port = 8000 is engine.port: the two must differ"
    ]


def test_a_boolean_park_port_is_no_port(profiles_dir: Path) -> None:
    """TOML's true is Python's True, an int subclass: it must not pass as port 1."""
    found = park_findings(profiles_dir, supervisor="park_port = true")
    assert any("needs supervisor.park_port" in e for e in found.errors)


@pytest.mark.parametrize(("value", "refused"), [('"1"', False), ("1", False), ('"0"', True), ('"yes"', True)])
def test_sleep_routes_need_dev_mode_which_the_profile_may_not_turn_off(
    profiles_dir: Path, value: str, refused: bool
) -> None:
    found = park_findings(profiles_dir, rest=f"[env]\nVLLM_SERVER_DEV_MODE = {value}\n")
    dev_mode = [e for e in found.errors if "VLLM_SERVER_DEV_MODE" in e]
    assert bool(dev_mode) is refused, found.errors
    if refused:
        assert dev_mode[0].endswith("the sleep routes exist only in dev mode")


def test_sleep_mode_turned_off_contradicts_parking_asleep_and_turned_on_agrees(profiles_dir: Path) -> None:
    off = park_findings(profiles_dir, rest="[args]\nenable-sleep-mode = false\n")
    assert [e for e in off.errors if "contradict" in e] == [
        f'{profiles_dir / "p.toml"}: supervisor.park = "sleep" with args.enable_sleep_mode = false: '
        "they contradict each other"
    ]
    assert park_findings(profiles_dir, rest="[args]\nenable_sleep_mode = true\n").errors == []


def test_parking_by_stopping_judges_neither_the_host_nor_the_second_port(profiles_dir: Path) -> None:
    (profiles_dir / "p.toml").write_text(
        '[engine]\nmodel = "m"\nhost = "0.0.0.0"\n[supervisor]\npark = "stop"\n'
        "[args]\nenable_sleep_mode = false\n"
    )
    found = Findings()
    check_semantics(resolve(profiles_dir, "p"), found)
    assert found.items == []


@pytest.mark.parametrize(
    ("hook", "errors"),
    [
        ('["/usr/local/bin/switch", "{profile}", "{host}:{port}", "{url}"]', []),
        ('["/bin/echo", "{gpu}", "{pid}"]', ["unknown placeholder {gpu}", "unknown placeholder {pid}"]),
        ('["/bin/echo", "{}"]', ["unknown placeholder {}"]),
        ('["/bin/echo", "{PORT}"]', ["unknown placeholder {PORT}"]),
        ("[]", ["is empty"]),
    ],
)
def test_the_switch_hook_takes_only_the_four_placeholders(
    profiles_dir: Path, hook: str, errors: list[str]
) -> None:
    (profiles_dir / "p.toml").write_text(f'[engine]\nmodel = "m"\n[supervisor]\non_switch = {hook}\n')
    found = Findings()
    check_semantics(resolve(profiles_dir, "p"), found)
    assert len(found.errors) == len(errors), found.errors
    for message, phrase in zip(found.errors, errors, strict=True):
        assert message.startswith(f"{profiles_dir / 'p.toml'}: supervisor.on_switch") and phrase in message
    if errors and "placeholder" in errors[0]:
        assert found.errors[0].endswith("(known: host, port, profile, url)")


# ---- trial = "beside": a second port, and a way to move the clients -------------------------------


def beside_findings(
    profiles_dir: Path, supervisor: str, rest: str = "[frontdoor]\nport = 9000\n"
) -> Findings:
    (profiles_dir / "p.toml").write_text(
        f'[engine]\nmodel = "m"\n[supervisor]\ntrial = "beside"\n{supervisor}\n{rest}'
    )
    found = Findings()
    check_semantics(resolve(profiles_dir, "p"), found)
    return found


def test_a_trial_beside_production_needs_the_second_port_and_a_front_door(profiles_dir: Path) -> None:
    assert beside_findings(profiles_dir, "park_port = 8001").errors == []
    (no_port,) = beside_findings(profiles_dir, "stop_grace_s = 5").errors
    assert 'supervisor.trial = "beside" needs supervisor.park_port' in no_port
    assert beside_findings(profiles_dir, "park_port = 8000").errors == [
        "supervisor.park_port = 8000 is engine.port: the two must differ"
    ]
    (no_door,) = beside_findings(profiles_dir, "park_port = 8001", rest="").errors
    assert "needs [frontdoor] port (or supervisor.on_switch)" in no_door
    hook = 'park_port = 8001\non_switch = ["/bin/true", "{port}"]'
    assert beside_findings(profiles_dir, hook, rest="").errors == []  # a proxy of its own, told by the hook


def test_a_power_limit_without_a_trial_beside_is_said_to_do_nothing(profiles_dir: Path) -> None:
    (profiles_dir / "p.toml").write_text('[engine]\nmodel = "m"\n[supervisor]\npower_limit_w = 300\n')
    found = Findings()
    check_semantics(resolve(profiles_dir, "p"), found)
    assert found.errors == [] and any('without supervisor.trial = "beside"' in w for w in found.warnings)
