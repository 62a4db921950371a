"""The smoke gate's needle is sized by the server's `/tokenize`, and the default passes on the demo."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests

from tests.integration.bench_support import FAST, SPEED
from tests.launcher_run import LAUNCH, free_port
from tests.simserver import running_sim
from vllm_sim import tokenizer

pytestmark = pytest.mark.integration

REAL_TOKENIZE = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "eager" / "tokenize.json"


def test_the_simulator_answers_tokenize_as_vllm_0_26_does() -> None:
    real = json.loads(REAL_TOKENIZE.read_text(encoding="utf-8"))  # recorded on the H200
    with running_sim([*FAST, "--max-model-len", "4096"], speed=SPEED) as sim:
        text = "Hello world, twice: hello world."
        chat = requests.post(
            sim.url + "/tokenize", json={"messages": [{"role": "user", "content": text}]}, timeout=10
        )
        plain = requests.post(sim.url + "/tokenize", json={"prompt": text}, timeout=10)
        unknown = requests.post(sim.url + "/tokenize", json={"model": "nope", "prompt": "x"}, timeout=10)
    assert chat.status_code == plain.status_code == 200
    assert set(chat.json()) == set(real) == {"count", "max_model_len", "tokens", "token_strs"}
    assert plain.json()["tokens"] == tokenizer.encode(text) and plain.json()["count"] == len(
        plain.json()["tokens"]
    )
    assert chat.json()["count"] > plain.json()["count"]  # the chat template's tokens are counted too
    assert chat.json()["max_model_len"] == 4096 and chat.json()["token_strs"] is None
    assert unknown.status_code == 404


def test_the_default_needle_passes_on_the_shipped_demo(shipped_profiles: Path, tmp_path: Path) -> None:
    demo = shipped_profiles / "demo.toml"
    text = demo.read_text(encoding="utf-8").replace("port = 8765", f"port = {free_port()}")
    # The simulator's clock sped up as in every other run (startup and an 8K prefill took 20 s of
    # wall at the demo's speed); what is asserted is counted in tokens, not timed.
    assert "sim_startup_speed = 8\n" in text
    text = text.replace("sim_startup_speed = 8\n", "sim_startup_speed = 1000\nsim_speed = 50\n")
    demo.write_text(text + '\n[gates]\norder = ["health", "smoke"]\n', encoding="utf-8")
    argv = [str(LAUNCH), "--profiles-dir", str(shipped_profiles), "--state-dir", str(tmp_path / "state"),
            "try", "--profile", "demo", "--json", "--skip-preflight"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    smoke = next(g for g in json.loads(done.stdout)["gates"] if g["name"] == "smoke")
    assert done.returncode == 0, smoke
    assert smoke["evidence"]["results"]["needle"] == "ok"
    # default needle_contexts [8192] on max_model_len 8192: it fills what fits, leaving 256 to answer
    (tokens,) = smoke["evidence"]["needle_tokens"]
    assert 0.97 * (8192 - 256) <= tokens <= 8192 - 256, tokens
    assert smoke["evidence"]["notes"] == []  # counted by the server, not estimated
    log = Path(json.loads(done.stdout)["engine_log"])  # the report names vLLM's own log
    assert log == tmp_path / "state" / "profiles" / "demo" / "logs" / "try.log" and log.is_file()
