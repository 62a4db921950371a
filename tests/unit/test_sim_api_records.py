"""The simulated API server's own lines (`vllm_sim/announce.py`, `config_text_026.py`) against the real
vLLM 0.26.0 runs: banner, `non-default args:`, the config it resolves, the refusal of an unknown
reasoning parser, going live, a dead engine and a failed start, each in-process into a file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.real_runs import RUNS, SCHEMA, Record, captured, records, sim_config, use_env
from vllm_sim import announce
from vllm_sim.dev_routes import DEV_ROUTES
from vllm_sim.http_app import routes_for
from vllm_sim.versions import V026

# The host's fd limit (system_utils.py:299) decides whether vLLM warns: neither side is compared.
HOST = "system_utils.py:299"
# Stand-ins, checked apart: the args' order (a dict, compared as one below) and the architecture, which
# the simulator reads from the model's name (`/root/tiny` names none; the real config.json said Qwen2).
APART = {"api_utils.py:273", "model.py:623"}
RAW = re.compile(r"^\(APIServer pid=\d+\) (?!(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d )(?P<text>.*)$")
FRAME = re.compile(
    r'^  File "(?:.*/)?((?:vllm|uvloop|asyncio|pydantic)/[^"]+|<frozen runpy>|[^"/]+\.pyx|contextlib\.py)", '
    r"line (\d+), in (\S+)"
)


def raw_lines(text: str) -> list[str]:
    """The API server's unformatted stderr lines (tracebacks, uvicorn), without their prefix."""
    return [m["text"] for line in text.splitlines() if (m := RAW.match(line))]


def frames(lines: list[str]) -> list[tuple[str, int, str]]:
    """A traceback's frames as (path from the package on, line, function): install paths differ."""
    return [(m[1], int(m[2]), m[3]) for line in lines if (m := FRAME.match(line))]


def api_records(run_name: str) -> list[Record]:
    return [r for r in records(RUNS[run_name].text(), "APIServer") if r.src != HOST]


def real_config(run_name: str) -> list[Record]:
    """The API server's records until it serves (`Supported tasks`) or refuses."""
    found = api_records(run_name)
    ends = [i for i, r in enumerate(found) if r.text.startswith("Supported tasks")]
    return found[: ends[0]] if ends else found


def announce_config(run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, str]:
    """banner_lines then config_lines as api_server.run calls them: whether it went on, and the text."""
    use_env(monkeypatch, RUNS[run_name].env)
    cfg = sim_config(RUNS[run_name])
    with captured("APIServer", tmp_path) as (log, path):
        went_on = announce.banner_lines(log, cfg, V026) and announce.config_lines(log, cfg, V026, SCHEMA)
        return went_on, path.read_text(encoding="utf-8")


def sim_records(text: str) -> list[Record]:
    return [r for r in records(text, "APIServer") if r.src != HOST]


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager", "reasoning"])
def test_the_api_server_resolves_its_config_with_the_real_runs_records(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logo, args, unknown variables, length, chunked prefill, scheduling, eager notes, runner fallback
    and the thinking-budget warning: the real run's sources and words, in its order."""
    went_on, text = announce_config(run_name, tmp_path, monkeypatch)
    assert went_on is (run_name != "reasoning")
    sim = sim_records(text)
    assert [(r.level, r.src) for r in sim] == [(r.level, r.src) for r in real_config(run_name)]
    assert [(r.src, r.text) for r in sim if r.src not in APART] == [
        (r.src, r.text) for r in real_config(run_name) if r.src not in APART
    ]


def shown_args(record: Record) -> dict[str, object]:
    """`non-default args: {...}` as a dict; the enum repr vLLM prints is read as its text."""
    body = record.text.removeprefix("non-default args: ")
    shown = ast.literal_eval(re.sub(r"<(DynamicShapesType\.\w+): '\w+'>", r"'\1'", body))
    assert isinstance(shown, dict), body
    return shown


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager", "reasoning"])
def test_non_default_args_are_the_real_ones_with_the_api_key_masked(
    run_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.26.0 parses JSON flags and shows the whole CompilationConfig it made of one; the key alone is
    hidden, on purpose (the simulator's log is the launcher's test data)."""
    _, text = announce_config(run_name, tmp_path, monkeypatch)
    sim = shown_args(next(r for r in sim_records(text) if r.src == "api_utils.py:273"))
    real = shown_args(next(r for r in real_config(run_name) if r.src == "api_utils.py:273"))
    if "api_key" in real:
        assert sim.pop("api_key") == "***"
        real.pop("api_key")
    assert sim == real


def test_an_unknown_reasoning_parser_is_refused_with_the_real_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.26.0 looks the parser up while it builds VllmConfig (config/reasoning.py:77): a KeyError that
    lists every parser it has, after the config's records and before any engine."""
    _, text = announce_config("reasoning", tmp_path, monkeypatch)
    real = raw_lines(RUNS["reasoning"].text())
    assert frames(raw_lines(text)) == frames(real)
    assert raw_lines(text)[-1] == real[-1]
    assert real[-1].startswith("KeyError: \"Reasoning parser 'nope-parser' not found. Available parsers: ")


def test_a_failed_engine_start_ends_in_the_real_runtime_error(tmp_path: Path) -> None:
    """free-memory.log: the engine raised, so the API server's `wait_for_engine_startup` says which
    core failed — `{}`, not yet seen as finished, as 0.26.0 printed it."""
    with captured("APIServer", tmp_path) as (log, path):
        announce.startup_failed(log, V026)
        sim = raw_lines(path.read_text(encoding="utf-8"))
    real = raw_lines(RUNS["free-memory"].text())
    assert frames(sim) == frames(real)
    assert (
        sim[-1]
        == real[-1]
        == ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
    )


def test_the_logo_is_one_record_so_every_line_carries_the_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, text = announce_config("tiny", tmp_path, monkeypatch)
    logo = [r for r in sim_records(text) if r.src == "api_utils.py:345"]
    assert [r.text for r in logo] == [r.text for r in real_config("tiny") if r.src == "api_utils.py:345"]
    assert logo[3].text.endswith("model   /root/tiny") and logo[2].text.endswith("version 0.26.0")


def test_without_the_logo_one_version_line_names_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_env(monkeypatch, {"VLLM_DISABLE_LOG_LOGO": "1"})
    with captured("APIServer", tmp_path) as (log, path):
        announce.banner_lines(log, sim_config(RUNS["tiny"]), V026)
        first = records(path.read_text(encoding="utf-8"))[0]
    assert first.text == "vLLM server version 0.26.0, serving model /root/tiny"


def test_only_unknown_vllm_variables_are_warned_about_in_sorted_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's own variables and the simulator's `VLLM_SIM_*` pass; any other `VLLM_*` is named."""
    env = {"VLLM_ZZ_TYPO": "1", "VLLM_GATE_PROFILE": "tiny", "VLLM_SIM_SPEED": "5", "VLLM_API_KEY": "k"}
    use_env(monkeypatch, env)
    with captured("APIServer", tmp_path) as (log, path):
        announce.config_lines(log, sim_config(RUNS["tiny"]), V026, SCHEMA)
        warned = [r.text for r in records(path.read_text(encoding="utf-8")) if r.src == "envs.py:2096"]
    assert warned == [
        "Unknown vLLM environment variable detected: VLLM_GATE_PROFILE",
        "Unknown vLLM environment variable detected: VLLM_ZZ_TYPO",
    ]


def announce_ready(run_name: str, tmp_path: Path, *flags: str, dev_mode: bool = False) -> list[Record]:
    cfg = sim_config(RUNS[run_name], *flags, environ={"VLLM_SERVER_DEV_MODE": "1"} if dev_mode else {})
    with captured("APIServer", tmp_path) as (log, path):
        announce.ready_lines(log, cfg, V026, "http://127.0.0.1:8011", routes_for(cfg.dev_mode))
        return records(path.read_text(encoding="utf-8"))


def real_ready(run_name: str) -> list[Record]:
    """From `Supported tasks` to the last route line."""
    found = api_records(run_name)
    first = next(i for i, r in enumerate(found) if r.text.startswith("Supported tasks"))
    last = max(i for i, r in enumerate(found) if r.text.startswith("Route: "))
    return found[first : last + 1]


@pytest.mark.parametrize("run_name", ["tiny", "tiny-ngram", "eager"])
def test_going_live_says_what_the_real_server_said_before_its_routes(run_name: str, tmp_path: Path) -> None:
    sim = [r for r in announce_ready(run_name, tmp_path) if not r.text.startswith("Route: ")]
    real = [r for r in real_ready(run_name) if not r.text.startswith("Route: ")]
    assert [(r.src, r.text) for r in sim] == [(r.src, r.text) for r in real]


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    rest = iter(whole)
    return all(item in rest for item in part)


def test_the_routes_listed_are_real_route_lines_in_the_real_order(tmp_path: Path) -> None:
    """The simulator serves fewer routes than vLLM; those it lists read as vLLM's, one line per method
    registered (`/ping` is a GET and a POST route), in vLLM's order."""
    sim = [r.text for r in announce_ready("tiny", tmp_path) if r.text.startswith("Route: ")]
    real = [r.text for r in real_ready("tiny") if r.text.startswith("Route: ")]
    assert is_subsequence(sim, real), sim
    assert sim[-1] == "Route: /v1/completions, Methods: POST"  # tests/simserver.py waits for it


def test_dev_mode_warns_and_lists_the_dev_routes_after_sagemakers_and_before_generate(tmp_path: Path) -> None:
    """0.26.0's build_app registers the dev routers after the SageMaker ones (/ping, /invocations) and
    before the generate ones (/v1/chat/completions...): entrypoints/openai/api_server.py:231-247."""
    found = announce_ready("tiny", tmp_path, dev_mode=True)
    warning = "SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!"
    assert [r.level for r in found if r.text == warning] == ["WARNING"]  # entrypoints/serve/__init__.py:37
    assert warning not in [r.text for r in announce_ready("tiny", tmp_path / "plain")]
    routes = [r.text.removeprefix("Route: ").split(",")[0] for r in found if r.text.startswith("Route: ")]
    dev = [path for path, _ in DEV_ROUTES]
    first, last = routes.index(dev[0]), routes.index(dev[-1])
    assert routes[first : last + 1] == dev
    assert routes[first - 1] == "/ping" and routes[last + 1] == "/v1/chat/completions"


def test_auto_tool_choice_is_announced_only_when_enabled(tmp_path: Path) -> None:
    announced = '"auto" tool choice has been enabled.'
    assert any(r.text == announced for r in announce_ready("tiny", tmp_path / "with"))
    without = announce_ready("tiny", tmp_path / "without", "--no-enable-auto-tool-choice")
    assert not any(r.text == announced for r in without)


def test_a_dead_engine_is_logged_as_the_real_api_server_logged_its_sigkilled_engine(tmp_path: Path) -> None:
    """record/eager: the MPClient's cleanup lines, then the output handler's EngineDeadError traceback."""
    with captured("APIServer", tmp_path) as (log, path):
        announce.engine_died(log, V026)
        sim = records(path.read_text(encoding="utf-8"))
    real = api_records("eager")
    start = next(i for i, r in enumerate(real) if "engine core exited unexpectedly" in r.text)
    real = real[start:]
    cleanup = [(r.level, r.src, r.text) for r in real if r.level != "ERROR"]
    assert [(r.level, r.src, r.text) for r in sim if r.level != "ERROR"] == cleanup
    assert {(r.level, r.src) for r in sim if r.level == "ERROR"} == {("ERROR", "async_llm.py:704")}
    assert next(r.text for r in sim if r.level == "ERROR") == "AsyncLLM output_handler failed."
    lines = [r.text for r in real]
    assert frames([r.text for r in sim]) == frames(lines)
    assert (
        sim[-1].text
        == lines[-1]
        == (
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause."
        )
    )


def uvicorn(engine_died: bool, tmp_path: Path) -> list[str]:
    with captured("APIServer", tmp_path) as (log, path):
        announce.uvicorn_stopped(log, V026, engine_died=engine_died)
        return raw_lines(path.read_text(encoding="utf-8"))


def test_uvicorn_finishes_the_process_only_when_the_engine_died(tmp_path: Path) -> None:
    """0.26.0 ended a SIGTERM without `Finished server process` (tiny.log), a dead engine's shutdown
    with it (record/eager)."""
    stopped = [
        "INFO:     Shutting down",
        "INFO:     Waiting for application shutdown.",
        "INFO:     Application shutdown complete.",
    ]
    assert uvicorn(False, tmp_path / "term") == stopped
    died = uvicorn(True, tmp_path / "died")
    assert died[:3] == stopped and re.fullmatch(r"INFO:     Finished server process \[\d+\]", died[3])
    for run_name, finished in (("tiny", False), ("eager", True)):
        real = raw_lines(RUNS[run_name].text())
        assert any(line.startswith("INFO:     Finished server process") for line in real) is finished
