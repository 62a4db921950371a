#!/usr/bin/env bash
# Raw recordings of the real vLLM 0.26.0 (no launcher in between), for the log-fact parser and the
# simulator's fidelity: how vLLM fails and answers when nobody is gating it. Runs on the GPU machine
# after `device.sh install`, from the repository root. Evidence: $OUT/record.tgz (one folder per case,
# each with vllm.log, the HTTP bodies and timings) and one line per finding in $OUT/record-summary.txt.
#
#   record-026.sh [CASE...]   default all; about 1, 1, 0.5 and 0.5 minutes
#     eager     --enforce-eager --api-key: /v1/models, /version, /metrics, chat and completions bodies
#               (plain, streamed, tool_choice required), a request to an unknown model, a hermes tool
#               call that does not parse (forced through structured output), a request without the key;
#               then SIGKILL of VLLM::EngineCore: when /health stops answering 200, when the API server ends
#     kv-small  --kv-cache-memory-bytes 262144 (256 tokens) for max_model_len 2048: vLLM's refusal
#     reasoning --reasoning-parser nope-parser: vLLM's refusal
#     port      a listener already holds the port: vLLM's refusal
#
# Every process it starts is in a session of its own and is ended by that group's id, never by name.
set -u
cases=("$@"); [ $# -eq 0 ] && cases=(eager kv-small reasoning port)
for c in "${cases[@]}"; do
  [[ $c =~ ^(eager|kv-small|reasoning|port)$ ]] || { echo "unknown case $c" >&2; exit 2; }
done
cd "$(dirname "$0")/../.." || exit 2
export PYTHONPATH=/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$PWD/scripts/real-vllm/rehearsal:$PWD:$PYTHONPATH
out=${OUT:-/tmp/record-out}; rec=$out/record; mkdir -p "$rec"
model=${REAL_VLLM_HOME:-/root}/tiny
port=8011; base=http://127.0.0.1:$port
key=sk-record-not-a-secret
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
say() { echo "[$case] $*" | tee -a "$out/record-summary.txt"; }

serve() {  # ARGS...: vllm serve the tiny model in a new session; sets $pid (= its process group)
  setsid python3 -m vllm.entrypoints.cli.main serve "$model" --served-model-name tiny \
    --max-model-len 2048 --gpu-memory-utilization 0.2 --host 127.0.0.1 --port $port \
    --enable-auto-tool-choice --tool-call-parser hermes "$@" > "$dir/vllm.log" 2>&1 &
  pid=$!; t0=$(now); echo "vllm serve $*" > "$dir/command.txt"
}
end_group() {  # TERM, then KILL, the session started by serve (its id is the leader's pid)
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 40); do kill -0 -- "-$pid" 2>/dev/null || return 0; sleep 0.5; done
  kill -KILL -- "-$pid" 2>/dev/null; sleep 1
}
wait_exit() {  # SECONDS: wait for the API server to end by itself; records its exit code
  local end=$((SECONDS + $1))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -ge $end ] && { say "still running after $1 s"; return 1; }; sleep 0.5
  done
  wait "$pid"; rc=$?; say "exited with $rc after $(since "$t0") s"
}
wait_ready() {  # SECONDS
  local end=$((SECONDS + $1))
  until curl -sf -m 2 "$base/health" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || { say "died before ready"; return 1; }
    [ $SECONDS -ge $end ] && { say "not ready after $1 s"; return 1; }; sleep 0.5
  done
  say "ready after $(since "$t0") s"
}
call() {  # NAME PATH [JSON]: one request with the key; body to NAME, status + time to http.txt
  local name=$1 path=$2 body=${3:-}
  if [ -n "$body" ]; then
    curl -s -m 60 -o "$dir/$name" -w "$name %{http_code} %{time_total}\n" -H "Authorization: Bearer $key" \
      -H 'Content-Type: application/json' -d "$body" "$base$path" >> "$dir/http.txt"
  else
    curl -s -m 60 -o "$dir/$name" -w "$name %{http_code} %{time_total}\n" -H "Authorization: Bearer $key" \
      "$base$path" >> "$dir/http.txt"
  fi
}

tools='[{"type":"function","function":{"name":"get_weather","description":"Current weather in a city",
 "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
hello='[{"role":"user","content":"Say hello."}]'
weather='[{"role":"user","content":"What is the weather in Paris?"}]'
# A call the hermes parser cannot read (the city is not a JSON string), forced through structured output.
broken_body() {  # STREAM(true|false)
  python3 - "$1" "$tools" "$weather" <<'PY'
import json, sys
regex = r'<tool_call>\{"name": "get_weather", "arguments": \{"city": Paris\}\}</tool_call>'
print(json.dumps({"model": "tiny", "messages": json.loads(sys.argv[3]), "tools": json.loads(sys.argv[2]),
                  "tool_choice": "auto", "max_tokens": 100, "temperature": 0, "stream": sys.argv[1] == "true",
                  "structured_outputs": {"regex": regex}}))
PY
}

case_eager() {
  serve --enforce-eager --api-key "$key"
  wait_ready 240 || { end_group; return; }
  call models.json /v1/models; call version.json /version; call metrics-before.txt /metrics
  call chat-plain.json /v1/chat/completions \
    "{\"model\":\"tiny\",\"messages\":$hello,\"max_tokens\":16,\"temperature\":0}"
  call chat-plain.sse /v1/chat/completions "{\"model\":\"tiny\",\"messages\":$hello,\"max_tokens\":16,
    \"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
  call chat-tool-required.json /v1/chat/completions "{\"model\":\"tiny\",\"messages\":$weather,
    \"tools\":$tools,\"tool_choice\":\"required\",\"max_tokens\":300,\"temperature\":0}"
  call chat-tool-required.sse /v1/chat/completions "{\"model\":\"tiny\",\"messages\":$weather,
    \"tools\":$tools,\"tool_choice\":\"required\",\"max_tokens\":300,\"temperature\":0,\"stream\":true}"
  call completions.json /v1/completions "{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":8,\"temperature\":0}"
  call completions.sse /v1/completions \
    "{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":8,\"temperature\":0,\"stream\":true}"
  call chat-unknown-model.json /v1/chat/completions "{\"model\":\"nope\",\"messages\":$hello,\"max_tokens\":4}"
  call chat-hermes-broken.json /v1/chat/completions "$(broken_body false)"
  call chat-hermes-broken.sse /v1/chat/completions "$(broken_body true)"
  curl -s -m 10 -o "$dir/no-key.json" -w "no-key.json %{http_code}\n" "$base/v1/models" >> "$dir/http.txt"
  call tokenize.json /tokenize "{\"model\":\"tiny\",\"prompt\":\"Hello world\"}"
  call metrics-after.txt /metrics
  say "$(tr '\n' ';' < "$dir/http.txt")"
  ps -eo pid,ppid,pgid,rss,args | awk -v g="$pid" '$3 == g' > "$dir/ps-serving.txt"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$dir/gpu-serving.txt" 2>&1
  # SIGKILL the engine core (a member of the group started above, found by the group id).
  local core; core=$(ps -eo pid,pgid,args | awk -v g="$pid" '$2 == g && /VLLM::EngineCore/ {print $1}' | head -1)
  if [ -n "$core" ]; then
    local tk; tk=$(now); kill -KILL "$core"
    local first503=""
    while kill -0 "$pid" 2>/dev/null; do
      if [ -z "$first503" ] && ! curl -sf -m 0.5 "$base/health" >/dev/null; then first503=$(since "$tk"); fi
      [ "$(since "$tk" | cut -d. -f1)" -ge 60 ] && break; sleep 0.1
    done
    say "EngineCore pid $core SIGKILLed: /health not 200 after ${first503:-never} s, API server gone after $(since "$tk") s"
    wait "$pid" 2>/dev/null; say "API server exit code $?"
  else
    say "no VLLM::EngineCore in group $pid"
  fi
  end_group
}
case_kv-small() { serve --enforce-eager --kv-cache-memory-bytes 262144; wait_exit 240 || end_group; }
case_reasoning() { serve --reasoning-parser nope-parser; wait_exit 120 || end_group; }
case_port() {
  setsid python3 -m http.server $port --bind 127.0.0.1 > /dev/null 2>&1 & local holder=$!
  sleep 1; serve; wait_exit 120 || end_group
  kill -TERM -- "-$holder" 2>/dev/null
}

for case in "${cases[@]}"; do
  dir=$rec/$case; mkdir -p "$dir"; say "start"
  "case_$case"
  grep -E ' (ERROR|WARNING) ' "$dir/vllm.log" | head -5 | sed "s/^/[$case] /" >> "$out/record-summary.txt"
done
tar -czf "$out/record.tgz" -C "$out" record && rm -rf "$rec"
