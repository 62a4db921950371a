#!/usr/bin/env bash
# Runs ON the GPU machine, after `scripts/real-vllm/device.sh install` (vLLM 0.26.0 in /tmp/site, the
# tiny random-weight Qwen2 in /root/tiny): `launch bench` against a real vLLM with ngram speculative
# decoding, so prefix-cache and spec-decode counters, SSE chunks and usage are vLLM's own. Writes
# the bench outputs, vLLM's log, two /metrics scrapes and one raw SSE stream to $OUT.
#
#   bash bench/real_vllm_bench.sh [SECONDS_TO_WAIT_FOR_VLLM]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
export PYTHONPATH=$root:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
port=8013
url=http://127.0.0.1:$port
spec='{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}'
setsid python3 -m vllm.entrypoints.cli.main serve /root/tiny --served-model-name tiny --host 127.0.0.1 \
  --port $port --max-model-len 4096 --gpu-memory-utilization 0.2 --speculative-config "$spec" \
  > "$out/vllm.log" 2>&1 &
vllm_pid=$!
python3 - "$url" "${1:-240}" <<'PY' || { tail -n 40 "$out/vllm.log"; kill -- -$vllm_pid; exit 3; }
import sys, time, urllib.request
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)
        print("vLLM ready"); sys.exit(0)
    except OSError:
        time.sleep(1)
sys.exit("vLLM not ready in time")
PY
python3 - "$url" "$out" <<'PY'
import json, sys, urllib.request
url, out = sys.argv[1], sys.argv[2]
open(f"{out}/metrics-fresh.txt", "wb").write(urllib.request.urlopen(url + "/metrics").read())
body = {"model": "tiny", "messages": [{"role": "user", "content": "Tell me about rivers."}], "stream": True,
        "stream_options": {"include_usage": True}, "max_tokens": 24, "temperature": 0.7, "seed": 3}
req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
open(f"{out}/stream.sse", "wb").write(urllib.request.urlopen(req).read())
PY
b() { python3 -m launcher.cli bench --url "$url" --no-plots "$@"; }
b --contexts short,2k --concurrency 1,8 --rounds 2 --max-tokens 48 --out "$out/mixed" > "$out/mixed.txt" 2>&1
b --contexts short --concurrency 8 --rounds 1 --max-tokens 48 --prompts 1 --temperature 0 --out "$out/same" \
  > "$out/same.txt" 2>&1
python3 -c "import sys,urllib.request; open(sys.argv[2],'wb').write(urllib.request.urlopen(sys.argv[1]+'/metrics').read())" \
  "$url" "$out/metrics-after.txt"
kill -TERM -- -$vllm_pid; sleep 5; kill -KILL -- -$vllm_pid 2>/dev/null
cat "$out/mixed.txt" "$out/same.txt"
