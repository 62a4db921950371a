#!/usr/bin/env python3
"""How far is `vllm-sim --sim-vllm-version 0.26` from a log the real vLLM wrote? A table of differences.

    scripts/real-vllm/fidelity.py tests/data/real-vllm-0.26/tiny.log --profile tiny
    scripts/real-vllm/fidelity.py REAL.log -- /root/tiny --served-model-name tiny --port 8011 ...
    scripts/real-vllm/fidelity.py --recorded          # both recorded runs (tiny, tiny-ngram)

Runs the simulator with the real run's vLLM flags (a profile in scripts/real-vllm/profiles/, or the
flags after `--`; its env too), a fast --sim-speed, a free port and the real GPU size; replays the
real run's GET requests; stops it with SIGTERM to its process group, as the launcher does. Both logs
are split into lines the way the launcher records them (`\\r`, `\\r\\n`, `\\n`). Compared: the log
parser's events and facts, a catalogue of named lines (presence, order within each process, line
shape: prefix form, process name, level, `[file.py:N]`), every `[file.py:N]` of the startup and
shutdown, and the content of the banner, `non-default args:` and the engine config line. Lines that
depend on the host (the fd-limit warning) are reported, not counted. Exit 0 when nothing differs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from httpdiff import http_rows, replay  # noqa: E402
from logdiff import READY, Row, table  # noqa: E402
from logdiff import compare as compare_lines  # noqa: E402
from score import markdown, score  # noqa: E402
from tbdiff import traceback_rows  # noqa: E402

from launcher.procgroup import group_members  # noqa: E402
from launcher.supervisor.logkeeper import LINE_END  # noqa: E402  (how the launcher splits a log)

DATA = REPO / "tests" / "data" / "real-vllm-0.26"
PROFILES = REPO / "scripts" / "real-vllm" / "profiles"
SIM = str(Path(sys.executable).with_name("vllm-sim"))
# Each recorded real run: its profile and the flags the recording added to it (README there).
EAGER = ["--enforce-eager"]
RECORDED: dict[str, tuple[str, list[str]]] = {
    "tiny.log": ("tiny", []),
    "tiny-ngram.log": ("tiny-ngram", []),
    "eager/vllm.log": ("tiny", [*EAGER, "--api-key", "sk-record-not-a-secret"]),
}
FAILED: dict[str, tuple[str, list[str]]] = {  # starts that failed: the simulator must fail the same way
    "free-memory.log": ("tiny", []),
    "kv-small/vllm.log": ("tiny", [*EAGER, "--kv-cache-memory-bytes", "262144"]),
    "reasoning/vllm.log": ("tiny", ["--reasoning-parser", "nope-parser"]),
    "port/vllm.log": ("tiny", []),  # another program held the port
}
__all__ = ["FAILED", "RECORDED", "Row", "compare", "profile_args", "run_sim", "score", "table"]


def compare(real: Path, sim: Path) -> list[Row]:
    """Every check of two logs: events, facts, named lines, sources, content, then tracebacks."""
    return compare_lines(real, sim) + traceback_rows(real, sim)


def split_lines(raw: bytes) -> list[str]:
    return [line for line in LINE_END.split(raw.decode("utf-8", "replace")) if line]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def group_gone(pgid: int, timeout_s: float) -> bool:
    """Whether no live process of the group is left, waiting up to `timeout_s` (zombies do not count:
    the launcher's own reading, `launcher.procgroup`)."""
    deadline = time.monotonic() + timeout_s
    while group_members(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def profile_args(name: str, extra: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The vLLM argv (after `serve`) and env the launcher rendered for a profile, plus `extra` flags."""
    from launcher.profile.plan import build_plan

    rendered = build_plan(PROFILES, name).rendered
    argv = list(rendered.argv)
    return [*argv[argv.index("serve") + 1 :], *(extra or [])], dict(rendered.env)


def sim_command(real_log: Path, vllm_args: list[str], speed: float, sim: str) -> tuple[list[str], int, str]:
    """vllm-sim argv (free port, GPU size from the real log) and the port it listens on."""
    text = real_log.read_text(encoding="utf-8", errors="replace")
    args, port = list(vllm_args), free_port()
    if "--port" in args:
        args[args.index("--port") + 1] = str(port)
    else:
        args += ["--port", str(port)]
    # vLLM's summary (`Free memory on device (F/T GiB) on startup.`) or its refusal (`... device cuda:0
    # (F/T GiB) on startup is less than desired ...`): the GPU's size, and for a refusal its free memory.
    gpu = re.search(
        r"Free memory on device (?:\S+ )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\)"
        r"(?P<refused> on startup is less)?",
        text,
    )
    host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
    extra = ["--sim-vllm-version", "0.26", "--sim-speed", str(speed), "--sim-startup-speed", str(20 * speed)]
    if "/root/tiny" in args:  # its KV bytes per token: tiny.log, 27.61 GiB for 28,947,616 tokens
        extra += ["--sim-kv-bytes-per-token", "1024"]
    if gpu:
        extra += ["--sim-gpu-memory-gib", gpu["total"]]
        if gpu["refused"]:
            extra += ["--sim-free-memory-gib", gpu["free"]]
    return [sim, "serve", *args, *extra], port, host


def run_sim(
    real_log: Path,
    vllm_args: list[str],
    env: dict[str, str],
    out: Path,
    speed: float = 50,
    deadline_s: float = 60,
    sim: str = SIM,
    http: list[Row] | None = None,
) -> Path:
    """Run the simulator as the real run ran, stop it like the launcher; `out` gets its log, split
    into lines as the launcher records them. A real run that found its port taken gets it taken.
    Where the run recorded its HTTP replies (`http.txt` beside the log), the same requests are made
    and their comparison goes to `http`."""
    text = real_log.read_text(encoding="utf-8", errors="replace")
    argv, port, host = sim_command(real_log, vllm_args, speed, sim)
    unknown = re.findall(r"Unknown vLLM environment variable detected: (\w+)", text)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    run_env.update({name: "fidelity" for name in unknown}, **env, PYTHONUNBUFFERED="1")
    raw = out.with_suffix(".raw")
    with contextlib.ExitStack() as stack:
        if "Address already in use" in text:
            holder = stack.enter_context(socket.socket())
            holder.bind((host, port))
            holder.listen()
        with raw.open("wb") as sink:
            proc = subprocess.Popen(
                argv, stdout=sink, stderr=subprocess.STDOUT, env=run_env, start_new_session=True
            )
        try:
            if READY not in text:  # a failed start: the simulator must fail the same way, by itself
                end = time.monotonic() + deadline_s  # or it starts, and its log shows how it differs
                while proc.poll() is None and time.monotonic() < end:
                    if READY in raw.read_text(errors="replace"):
                        break
                    time.sleep(0.05)
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=10)
                return _keep(raw, out)
            recording = real_log.parent if (real_log.parent / "http.txt").exists() else None
            rows = _serve_like(
                text, raw, proc, f"http://{host}:{port}", _key(vllm_args), deadline_s, recording
            )
            if http is not None:
                http.extend(rows)
        finally:
            if not group_gone(proc.pid, 0.0):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(5)
    return _keep(raw, out)


def _key(vllm_args: list[str]) -> str | None:
    return vllm_args[vllm_args.index("--api-key") + 1] if "--api-key" in vllm_args else None


def _serve_like(
    text: str,
    raw: Path,
    proc: subprocess.Popen[bytes],
    base: str,
    key: str | None,
    deadline_s: float,
    recording: Path | None,
) -> list[Row]:
    """Wait for ready, replay the real run's GETs (with its API key; a 401 or 404 is an answer, not
    an error) and its recorded requests, then end it as the real run ended (SIGTERM to the group, or
    SIGKILL of the engine) and check nothing is left."""
    end = time.monotonic() + deadline_s
    while READY not in raw.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"vllm-sim did not become ready:\n{raw.read_text(errors='replace')[-3000:]}")
        time.sleep(0.02)
    served = text.split(READY, 1)[-1].split("[shutdown]", 1)[0]
    for path in re.findall(r'"GET (\S+) HTTP/1\.1"', served):
        request = urllib.request.Request(base + path)
        if key:
            request.add_header("Authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                reply.read()
        except urllib.error.HTTPError as err:
            err.read()
    rows = http_rows(recording, replay(recording, base, key)) if recording else []
    if "engine core exited unexpectedly" in text:  # the recording SIGKILLed the engine only
        engine = [p for p in group_members(proc.pid) if p != proc.pid]
        for pid in engine:
            os.kill(pid, signal.SIGKILL)
    else:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=max(1.0, end - time.monotonic()))
    if not group_gone(proc.pid, 5.0):
        raise RuntimeError(f"vllm-sim left processes in group {proc.pid} after it stopped")
    return rows


def _keep(raw: Path, out: Path) -> Path:
    out.write_text("\n".join(split_lines(raw.read_bytes())) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], usage="%(prog)s [REAL_LOG] [options] [-- VLLM_FLAGS...]"
    )
    parser.add_argument("real_log", nargs="?", type=Path)
    parser.add_argument(
        "--profile", help="render the real run's flags from scripts/real-vllm/profiles/NAME.toml"
    )
    parser.add_argument("--recorded", action="store_true", help="check every recorded 0.26.0 run")
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    parser.add_argument("--speed", type=float, default=50.0)
    parser.add_argument("--keep", type=Path, help="directory for the simulator's logs")
    parser.add_argument("--sim", default=SIM, help="the vllm-sim program to run (default: this venv's)")
    parser.add_argument("--all", action="store_true", help="show the checks that agree too")
    given = sys.argv[1:] if argv is None else argv
    cut = given.index("--") if "--" in given else len(given)
    args, vllm_flags = parser.parse_args(given[:cut]), given[cut + 1 :]
    runs = (
        [(DATA / log, name, extra) for log, (name, extra) in {**RECORDED, **FAILED}.items()]
        if args.recorded
        else [(args.real_log, args.profile, [])]
    )
    if runs[0][0] is None:
        parser.error("give a real log (with --profile or flags after --), or --recorded")
    work = args.keep or Path(tempfile.mkdtemp(prefix="fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    failed, scores = 0, {}
    for real_log, profile, extra in runs:
        vllm_args, env = profile_args(profile, extra) if profile else (vllm_flags, {})
        env.update(dict(item.split("=", 1) for item in args.env))
        name = str(real_log.relative_to(DATA)) if real_log.is_relative_to(DATA) else real_log.name
        http: list[Row] = []
        out = work / f"sim-{name.replace('/', '-')}"
        sim_log = run_sim(real_log, vllm_args, env, out, args.speed, sim=args.sim, http=http)
        rows = compare(real_log, sim_log) + http
        print(f"== {real_log} vs {sim_log}\n{table(rows, args.all)}\n")
        failed += any(r.verdict == "DIFF" for r in rows)
        scores[name] = score(rows)
    print(markdown(scores))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
