"""GuideLLM and aiperf on the accuracy workload, against the same simulator, read back per request.

Both live in their own venvs (their dependencies — torch, transformers, pandas — have no place in
ours): `python3 -m venv /tmp/bench-tools && /tmp/bench-tools/bin/pip install guidellm`, and
`python3 -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install aiperf`. aiperf insists on a
Hugging Face tokenizer; with no hub reachable, `sim_tokenizer.py` writes a local word-level one
(token counts come from the server's usage either way). Both target 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path
from typing import Any

from truth import Errors, load

BENCH = Path(__file__).resolve().parent
TIMEOUT_S = 900


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], log: Path) -> tuple[int, float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    env.update(
        {
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "DO_NOT_TRACK": "1",
        }
    )
    cpu0 = _children_cpu()
    import time

    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(
            argv, stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT_S, env=env
        ).returncode
    return code, _children_cpu() - cpu0, time.monotonic() - t0


def guidellm(
    venv: Path,
    url: str,
    model: str,
    level: int,
    requests: int,
    tokens: int,
    texts: list[str],
    truth: Path,
    work: Path,
) -> dict[str, Any]:
    exe = venv / "bin" / "guidellm"
    if not exe.exists():
        return {"error": f"guidellm not installed ({exe} missing)"}
    data = work / f"guidellm-c{level}.jsonl"
    data.write_text(
        "".join(
            json.dumps({"prompt": texts[i % len(texts)], "output_tokens_count": tokens}, ensure_ascii=False)
            + "\n"
            for i in range(requests)
        ),
        encoding="utf-8",
    )
    out = work / f"guidellm-c{level}.json"
    argv = [
        str(exe),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model={model}",
        "--profile",
        f"kind=concurrent,streams={level}",
        "--constraint",
        f"kind=max_requests,count={requests}",
        "--data",
        f"kind=json_file,path={data}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console-interactive",
    ]
    code, cpu, wall = _run(argv, work / f"guidellm-c{level}.log")
    if code != 0 or not out.exists():
        return {"error": f"guidellm exited {code}; see {work / f'guidellm-c{level}.log'}"}
    rows = load(truth)
    errors = Errors()
    for req in json.loads(out.read_text(encoding="utf-8"))["benchmarks"][0]["requests"]["successful"]:
        timings = req["info"]["timings"]
        itl = req.get("inter_token_latency_ms")
        errors.add(
            rows.get(req.get("response_id") or ""),
            t_send=timings["request_start"],
            clock="wall",
            first=timings["first_token_iteration"],
            itl_mean=itl / 1000 if itl is not None else None,
        )
    return {**errors.summary(), "tool_cpu_s": cpu, "tool_wall_s": wall}


def aiperf(
    venv: Path,
    url: str,
    model: str,
    level: int,
    requests: int,
    tokens: int,
    texts: list[str],
    truth: Path,
    work: Path,
) -> dict[str, Any]:
    exe = venv / "bin" / "aiperf"
    if not exe.exists():
        return {"error": f"aiperf not installed ({exe} missing)"}
    tokenizer = work / "sim-tokenizer"
    if not (tokenizer / "tokenizer.json").exists():
        subprocess.run(
            [str(venv / "bin" / "python"), str(BENCH / "sim_tokenizer.py"), str(tokenizer)],
            check=True,
            capture_output=True,
        )
    data = work / "aiperf-prompts.jsonl"
    data.write_text(
        "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8"
    )
    out = work / f"aiperf-c{level}"
    argv = [
        str(exe),
        "profile",
        "--model",
        model,
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--input-file",
        str(data),
        "--custom-dataset-type",
        "single_turn",
        "--concurrency",
        str(level),
        "--request-count",
        str(requests),
        "--extra-inputs",
        f"max_tokens:{tokens}",
        "--extra-inputs",
        "ignore_eos:true",
        "--extra-inputs",
        "temperature:0.7",
        "--use-server-token-count",
        "--tokenizer",
        str(tokenizer),
        "--output-artifact-dir",
        str(out),
        "--export-level",
        "records",
        "--no-auto-plot",
    ]
    code, cpu, wall = _run(argv, work / f"aiperf-c{level}.log")
    records = out / "profile_export.jsonl"
    if code != 0 or not records.exists():
        return {"error": f"aiperf exited {code}; see {work / f'aiperf-c{level}.log'}"}
    rows = load(truth)
    errors = Errors()
    for line in records.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        meta, metrics = rec["metadata"], rec["metrics"]
        if meta.get("benchmark_phase") != "profiling" or "time_to_first_token" not in metrics:
            continue
        start = meta["request_start_ns"] / 1e9
        first = start + metrics["time_to_first_token"]["value"] / 1000
        chunks = [first]
        for gap in metrics.get("inter_chunk_latency", {}).get("value", []):
            chunks.append(chunks[-1] + gap / 1000)
        errors.add(
            rows.get(f"chatcmpl-{meta.get('x_request_id')}"),
            t_send=start,
            first=first,
            clock="wall",
            chunks=chunks,
        )
    return {**errors.summary(), "tool_cpu_s": cpu, "tool_wall_s": wall}


def run_external(
    tool: str,
    venv: Path,
    url: str,
    model: str,
    level: int,
    requests: int,
    tokens: int,
    texts: list[str],
    truth: Path,
    work: Path,
) -> dict[str, Any]:
    runner = {"guidellm": guidellm, "aiperf": aiperf}.get(tool)
    if runner is None:
        return {"error": f"unknown tool {tool!r}"}
    row = runner(venv, url, model, level, requests, tokens, texts, truth, work)
    if "tool_cpu_s" in row:
        row["cpu_ms_per_stream"] = row["tool_cpu_s"] * 1000 / requests
    return row
