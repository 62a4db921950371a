"""A chatty engine for bench_livelog.py: the real `vllm-sim` (same argv), plus, once it answers
/health, a steady stream of the lines a busy vLLM 0.26 prints (uvicorn access lines and
`loggers.py` stats lines, copied in form from tests/data/real-vllm-0.26/tiny.log).

Run through a `vllm-sim` wrapper script so the launcher treats it as the simulator:
`chatty_engine.py LINES_PER_S serve MODEL --port N ...`. SIGTERM (the launcher's killpg) ends both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import requests

ACCESS = '(APIServer pid={pid}) INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
STATS = (
    "(APIServer pid={pid}) INFO 11-29 09:32:34 [loggers.py:310] Engine 000: Avg prompt throughput: "
    "813.9 tokens/s, Avg generation throughput: 1997.5 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 0.0%, Prefix cache hit rate: 95.8%\n"
)
TICK_S = 0.01


def main() -> None:
    rate, argv = float(sys.argv[1]), sys.argv[2:]
    sim = os.path.join(os.path.dirname(sys.executable), "vllm-sim")
    child = subprocess.Popen([sim, *argv])
    port = argv[argv.index("--port") + 1]
    while child.poll() is None:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.05)
    pid, out, sent, started = os.getpid(), sys.stdout, 0, time.monotonic()
    while child.poll() is None:
        due = int((time.monotonic() - started) * rate)
        batch = [STATS.format(pid=pid) if (sent + i) % 100 == 99 else ACCESS.format(pid=pid, port=40000 + i)
                 for i in range(due - sent)]  # fmt: skip
        out.write("".join(batch))
        out.flush()
        sent = due
        time.sleep(TICK_S)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
