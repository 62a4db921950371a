"""How the probe measures one arm (launcher/probe/measure.py) against a scripted vLLM on a real
loopback socket: the untimed warm-up first, then the bench `runs` times on one prompt set, each run
kept in its own folder for the comparison; a stop request ends it as "interrupted"."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from launcher.bench.options import BenchOptions
from launcher.bench.target import Endpoint, ServerUnreachable
from launcher.bench.workload import ContextSpec
from launcher.probe.measure import BenchMeasure, Interrupted
from tests.scripted_http import HANG, InstantVllm, Reply, Request, in_thread

OPTIONS = BenchOptions(
    concurrency=(1,), contexts=(ContextSpec("short", 0),), rounds=1, prompts=2, max_tokens=4
)


def measure(
    tmp_path: Path, *, runs: int = 2, warmup: int = 3, stop: threading.Event | None = None
) -> BenchMeasure:
    return BenchMeasure(OPTIONS, runs, warmup, tmp_path / "probe", "p1", stop or threading.Event())


def headers(engine: InstantVllm) -> list[str]:
    return [str(c["messages"][-1]["content"]).split("\n")[0] for c in engine.chats]  # type: ignore[index]


def test_an_arm_is_warmed_up_then_measured_run_after_run_each_in_its_own_folder(tmp_path: Path) -> None:
    engine = InstantVllm()
    with in_thread(engine) as server:
        measured = measure(tmp_path)("base", Endpoint(server.url, None, None, "arm base"))
    assert measured.folder == tmp_path / "probe" / "arm-base" and len(measured.summaries) == 2
    sent = headers(engine)
    assert sorted(sent[:3]) == [f"[bench p1-base-warmup | short | prompt {k} of 3]" for k in (1, 2, 3)]
    assert len(sent) == 3 + 2 * 5
    runs = [sent[3:8], sent[8:13]]  # per run: one cold prompt, the set (2) as warm-up, one timed round of it
    assert all(run[0].startswith("[cold ") for run in runs) and runs[0][0] != runs[1][0]
    assert runs[0][1:] == runs[1][1:], "every run asks the same questions: runs and arms compare"
    assert all(h.startswith("[bench p1 | short | prompt ") for run in runs for h in run[1:])
    for k, summary in enumerate(measured.summaries, start=1):
        folder = measured.folder / f"run-{k}"
        assert json.loads((folder / "summary.json").read_text()) == json.loads(json.dumps(summary))
        assert len((folder / "requests.jsonl").read_text().splitlines()) == 1 + 2 + 2
        assert summary["server"]["model"] == "m" and summary["server"]["origin"] == "arm base"
    listed = json.loads((measured.folder / "runs.json").read_text())
    assert listed == [str(measured.folder / f"run-{k}" / "summary.json") for k in (1, 2)]


def test_no_warm_up_asked_none_sent(tmp_path: Path) -> None:
    engine = InstantVllm()
    with in_thread(engine) as server:
        measured = measure(tmp_path, runs=1, warmup=0)("a1", Endpoint(server.url, "m", None, "arm a1"))
    assert len(measured.summaries) == 1
    assert not any("warmup" in h for h in headers(engine)) and len(engine.chats) == 1 + 2 + 2


def test_a_stop_request_ends_a_measurement_in_flight_as_interrupted(tmp_path: Path) -> None:
    engine = InstantVllm()
    stop = threading.Event()

    def stuck(request: Request) -> Reply:
        if request.path != "/v1/chat/completions":
            return engine(request)
        stop.set()  # the operator's stop arrives while this request hangs in a wedged engine
        return HANG

    with in_thread(stuck) as server, pytest.raises(Interrupted, match="stopped while measuring"):
        measure(tmp_path, stop=stop)("a1", Endpoint(server.url, None, None, "arm a1"))
    assert any(r.path == "/v1/chat/completions" for r in server.requests)
    assert not (tmp_path / "probe" / "arm-a1" / "runs.json").exists()


def test_an_arm_whose_server_is_gone_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(ServerUnreachable, match=r"nothing answers at .* \(arm a1\)"):
        measure(tmp_path)("a1", Endpoint(url, None, None, "arm a1"))
