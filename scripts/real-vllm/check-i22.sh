#!/usr/bin/env bash
# Issue 22 on the GPU machine: the whole chain on the real vLLM 0.26.0 with a model that answers.
# Runs after `device.sh install` (which copies a carried .vllm-wheels/tiny-chat to /root/tiny-chat).
# Each step's evidence goes to $OUT/stepN.tgz, one line per finding to $OUT/summary.txt.
#
#   check-i22.sh [STEP...]   steps 0-6, default 0-5; device calls `0 1 3`, `4`, `6`, `2 5` (each < 10 min)
#     0  the model: verify_tiny_chat.py on the carried weights; trained on the GPU when absent or failing
#     1  launch --profile tiny-chat: default chain + smoke -> promoted, ALL_PASS; real bodies kept
#     2  launch set tiny-chat tool_call_parser=llama3_json --apply: rejected by tool_call, rolled back
#     3  launch bench on production (reasoning off): cold/warm TTFT, concurrency 1-64, short and 1k;
#        then one prompt at temperature 0 (same-sequence), and a bench beside another client (other-traffic)
#     4  launch probe: arms max_num_seqs 8 and 32; production restored
#     5  production stopped; tiny-chat-think, then tiny-chat-loop: bench with reasoning on, and on a loop
#     6  GuideLLM 0.8.1 on production, step 3's workload; side-by-side table (device.sh guidellm-install
#        first; not in the default list; run it before 5, which stops production)
# Production (tiny-chat) is started by step 1 (or by the first later step that finds it not serving)
# and serves between calls; step 5 stops it first (one model per GPU) and leaves nothing running.
#
# Rehearse off the GPU (vllm-sim --sim-vllm-version 0.26 stands in for vLLM; step 0 only verifies):
#   REAL_VLLM_HOME=/tmp/i22-home I22_PORT=18412 TRAIN_PY=/tmp/tiny-venv/bin/python \
#   PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 bash scripts/real-vllm/check-i22.sh
set -u
steps=("$@"); [ $# -eq 0 ] && steps=(0 1 2 3 4 5)
for n in "${steps[@]}"; do
  [[ $n =~ ^[0-6]$ ]] || { echo "unknown step $n (0-6)" >&2; exit 2; }
done
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-i22-out}; work=/tmp/check-i22; state=/tmp/check-i22-state
home=${REAL_VLLM_HOME:-/root}; port=${I22_PORT:-8012}; train_py=${TRAIN_PY:-python3}
model=$home/tiny-chat; prod=tiny-chat
mkdir -p "$out" "$work"
# The profiles are copied (step 2's `launch set` edits one; the checkout stays as it was), with the
# model path and ports of this machine.
rm -rf "$work/profiles"; cp -r scripts/real-vllm/profiles "$work/profiles"
sed -i "s|\"/root/tiny-chat\"|\"$model\"|; s|^port = 8012|port = $port|" "$work/profiles/tiny-chat.toml"
sed -i "s|^port = 8013|port = $((port + 1))|" "$work/profiles/tiny-chat-think.toml"
sed -i "s|^port = 8014|port = $((port + 2))|" "$work/profiles/tiny-chat-loop.toml"
L=(python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$state")

say() { echo "[step $n] $*" | tee -a "$out/summary.txt"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 || echo n/a; }
vllm_procs() { ps -eo pid,ppid,pgid,etimes,rss,args | grep -E 'VLLM::|vllm\.entrypoints|vllm-sim|launcher\.cli' | grep -v grep; }
until_true() {  # SECONDS COMMAND...: poll every 0.5 s until the command succeeds or time is up
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.5; done
}
phase_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('phase'))" \
             "$state/profiles/$1/status.json" 2>/dev/null; }
phase_in() { local p; p=$(phase_of "$1"); shift; [[ " $* " == *" $p "* ]]; }
gate_lines() { python3 "$repo/scripts/real-vllm/i22_evidence.py" gates "$@"; }

start() {  # PROFILE: `launch --profile` in the background, in its own session; pid in $work/P.pid
  rm -rf "${state:?}/profiles/$1"
  setsid "${L[@]}" --profile "$1" > "$w/launch-$1.txt" 2>&1 &
  echo $! > "$work/$1.pid"
}

await() {  # PROFILE T0: until it serves or fails (480 s); its gates to the summary; 0 when serving
  local p=$1 t0=$2
  until_true 480 phase_in "$p" serving failed stopped || say "$p: no verdict in 480 s"
  say "launch --profile $p: phase $(phase_of "$p") after $(since "$t0") s (launcher pid $(cat "$work/$p.pid"))"
  cp "$state/profiles/$p/status.json" "$w/status-$p.json" 2>/dev/null
  gate_lines "$state/profiles/$p/status.json" | tee -a "$out/summary.txt"
  phase_in "$p" serving
}

serve() { local t0; t0=$(now); start "$1"; await "$1" "$t0"; }

stop() {  # PROFILE: SIGTERM this script's launcher of PROFILE, wait for it to exit. Its pid: the pid
  # file, or (after `launch probe` restored production under a new pid) this state dir's status.json.
  local p=$1 pid; pid=$(cat "$work/$p.pid" 2>/dev/null)
  kill -0 "$pid" 2>/dev/null || pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['launcher_pid'])" \
                                      "$state/profiles/$p/status.json" 2>/dev/null)
  if phase_in "$p" stopped failed || ! kill -0 "$pid" 2>/dev/null; then rm -f "$work/$p.pid"; return 0; fi
  kill -TERM "$pid" 2>/dev/null && until_true 120 bash -c "! kill -0 $pid 2>/dev/null"
  say "stopped $p (launcher pid $pid): phase $(phase_of "$p"); $(vllm_procs | grep -cv launcher) vLLM processes left"
  cp "$state/profiles/$p/logs/"*.log "$w/" 2>/dev/null; rm -f "$work/$p.pid"
}

production() {  # production serving, or started now
  if phase_in $prod serving serving_last_good && curl -sf -m 5 "http://127.0.0.1:$port/v1/models" >/dev/null; then
    return 0; fi
  say "production $prod is not serving: starting it"
  serve $prod
}

step0() {
  if [ -f "$model/model.safetensors" ] && "$train_py" scripts/real-vllm/verify_tiny_chat.py "$model" --held-out "${I22_HELD_OUT:-80}" > "$w/verify.txt" 2>&1; then
    say "carried model verified: $(tail -2 "$w/verify.txt" | tr '\n' ' ')"
  elif [ -f "$model/model.safetensors" ] && [ "${I22_KEEP_CARRIED:-0}" = 1 ]; then
    # The verifier is stricter than the gates (the named call's city must be Paris; the gate asks a
    # schema-valid string): the operator chose to let vLLM's own gates judge the carried model.
    say "carried model kept (I22_KEEP_CARRIED=1) although the verifier says: $(tail -2 "$w/verify.txt" | tr '\n' ' ')"
  elif [ -n "${VLLM_GATE_REHEARSAL:-}" ]; then
    say "rehearsal: $model does not verify and there is no GPU to train on: $(tail -1 "$w/verify.txt" 2>/dev/null)"
  else
    local t0; t0=$(now)
    say "training on the GPU ($( [ -d "$model" ] && echo 'the carried model failed its verification' || echo 'no model carried'))"
    rm -rf "$model"
    "$train_py" scripts/real-vllm/train_tiny_chat.py "$model" --device cuda --steps "${I22_STEPS:-8000}" --batch 64 > "$w/train.txt" 2>&1
    say "trained: exit $? after $(since "$t0") s: $(tail -1 "$w/train.txt")"
    "$train_py" scripts/real-vllm/verify_tiny_chat.py "$model" --held-out "${I22_HELD_OUT:-80}" > "$w/verify.txt" 2>&1
    say "verify: exit $?: $(tail -2 "$w/verify.txt" | tr '\n' ' ')"
  fi
  cp "$model/verify.json" "$model/config.json" "$w/" 2>/dev/null
  say "model: $(du -sb "$model" 2>/dev/null | cut -f1) bytes; $(grep -h 'held-out' "$w/verify.txt")"
}

step1() {
  serve $prod || return 1
  python3 "$repo/scripts/real-vllm/i22_evidence.py" bodies "http://127.0.0.1:$port" "$w" | tee -a "$out/summary.txt"
  "${L[@]}" parse-log "$state/profiles/$prod/logs/engine.log" > "$w/facts.txt" 2>&1
  cp "$state/profiles/$prod/logs/"*.log "$w/" 2>/dev/null
}

step2() {
  production || return 1
  local t0 rc; t0=$(now)
  "${L[@]}" set $prod tool_call_parser=llama3_json --tag badparser --apply --timeout-s 480 > "$w/set.txt" 2>&1; rc=$?
  say "launch set $prod tool_call_parser=llama3_json --tag badparser --apply: exit $rc after $(since "$t0") s (3 = rolled back)"
  tail -6 "$w/set.txt" | sed 's/^/  /' | tee -a "$out/summary.txt"
  # The file keeps a rejected change, and tiny-chat-think/-loop extend tiny-chat: put it back, or step 5
  # in the same call serves llama3_json too (2026-12-02, call 9). Serving last-good, this restarts nothing.
  "${L[@]}" rollback badparser --profile $prod --timeout-s 480 > "$w/rollback.txt" 2>&1
  say "launch rollback badparser --profile $prod: exit $? ($(tail -1 "$w/rollback.txt" | cut -c1-160))"
  [ $rc = 0 ] && say "NOT rejected (a rehearsal's simulator serves any parser): the rollback above restarted it"
  until_true 120 phase_in $prod serving_last_good serving
  cp -r "$state/profiles/$prod/logs" "$w/logs"
  grep -rh -m2 -E 'could not locate the bot token|Error in parser creation' "$w/logs" | cut -c1-300 | sed 's/^/  vLLM: /' | tee -a "$out/summary.txt"
  cp "$state/profiles/$prod/status.json" "$w/status-after.json" 2>/dev/null
  gate_lines "$w/status-after.json" | tee -a "$out/summary.txt"
  "${L[@]}" history --profile $prod > "$w/history.txt" 2>&1
  say "phase $(phase_of $prod); /v1/models: $(curl -s -m 5 "http://127.0.0.1:$port/v1/models" | head -c 200)"
}

bench() {  # NAME URL-or-profile-args...: launch bench into $w/bench-NAME, its table to the summary
  local name=$1 t0 rc; shift; t0=$(now)
  timeout -k 30 300 "${L[@]}" bench "$@" --out "$w/bench-$name" > "$w/bench-$name.txt" 2>&1; rc=$?
  say "launch bench $name $*: exit $rc after $(since "$t0") s"
  grep -vE '^\s*$' "$w/bench-$name.txt" | tail -25 | sed 's/^/  /' | tee -a "$out/summary.txt"
}

step3() {
  production || return 1
  bench off --profile $prod --concurrency 1,2,4,8,16,32,64 --contexts short,1k --rounds 2 --max-tokens 256 --prompts 8
  # Two traps on purpose, each where it was met: one prompt at temperature 0 (copies of one sequence,
  # which once faked 80 % spec-decode acceptance), and another client on the same server meanwhile.
  bench same --profile $prod --concurrency 8 --contexts short --rounds 1 --max-tokens 64 --prompts 1 --temperature 0
  local other=$work/other-client.pid
  ( while :; do curl -s -m 30 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
      -d '{"model": "tiny-chat", "max_tokens": 128, "messages": [{"role": "user", "content": "Explain how tides work."}]}' \
      > /dev/null; done ) & echo $! > "$other"
  bench busy --profile $prod --concurrency 1,8 --contexts short --rounds 1 --max-tokens 128 --prompts 8
  kill "$(cat "$other")" 2>/dev/null; wait "$(cat "$other")" 2>/dev/null; rm -f "$other"
}

step4() {
  production || return 1
  # The probe measures the profile's own launch: after a rollback (step 2) production serves its last
  # good launch, which the probe refuses (the 2026-12-01 run lost its figures so). Start it anew.
  if ! phase_in $prod serving; then
    say "production is $(phase_of $prod), not serving its own launch: restarting it for the probe"
    stop $prod; serve $prod || return 1
  fi
  local t0 rc; t0=$(now)
  timeout -k 30 540 "${L[@]}" probe --profile $prod --arm seqs8:max_num_seqs=8 --arm seqs32:max_num_seqs=32 \
    --runs 2 --bench quick --concurrency 1,8,32 --out "$w/probe" > "$w/probe.txt" 2>&1; rc=$?
  say "launch probe --profile $prod --arm seqs8:max_num_seqs=8 --arm seqs32:max_num_seqs=32: exit $rc after $(since "$t0") s"
  grep -vE '^\s*$' "$w/probe.txt" | tail -30 | sed 's/^/  /' | tee -a "$out/summary.txt"
  until_true 120 phase_in $prod serving
  say "production after the probe: phase $(phase_of $prod); /v1/models: $(curl -s -m 5 "http://127.0.0.1:$port/v1/models" | head -c 120)"
}

step5() {  # one model per GPU: production steps aside, then each profile alone
  stop $prod
  serve tiny-chat-think && {
    bench think --url "http://127.0.0.1:$((port + 1))" --concurrency 1,8,64 --contexts short --rounds 2 --max-tokens 256
    bench think-small --url "http://127.0.0.1:$((port + 1))" --concurrency 1,8 --contexts short --rounds 1 --max-tokens 24
  }
  stop tiny-chat-think
  serve tiny-chat-loop && \
    bench loop --url "http://127.0.0.1:$((port + 2))" --concurrency 1,8,64 --contexts short --rounds 2 --max-tokens 256
  stop tiny-chat-loop
}

# --- step 6: GuideLLM beside launch bench (kept apart from steps 0-5) ---------------------------
metrics_to() { curl -s -m 5 "http://127.0.0.1:$port/metrics" > "$1"; }
prefix_delta() {  # BEFORE AFTER: prefix-cache hits/queries between two /metrics scrapes, in tokens
  python3 -c 'import sys; from pathlib import Path
from launcher.bench.server_metrics import MetricsSnapshot, parse_text
a, b = (MetricsSnapshot(0.0, parse_text(Path(p).read_text(encoding="utf-8"))) for p in sys.argv[1:3])
d = a.delta(b)
print("n/a" if d.hit_rate is None else f"{d.prefix_hits:.0f}/{d.prefix_queries:.0f} tokens ({100 * d.hit_rate:.1f}%)")' "$1" "$2" 2>/dev/null || echo n/a
}

step6() {  # GuideLLM on production with step 3's workload; both tools' figures in one table
  production || return 1
  local gsite=${GUIDE_SITE:-/tmp/guidellm-site} ref=$work/step3/bench-off/summary.json
  # Its own site first, on its own PYTHONPATH only (device.sh guidellm-install); vLLM's deps after it.
  local g=(env PYTHONPATH="$gsite:/tmp/site" "${GUIDE_PY:-python3}")
  if ! "${g[@]}" -m guidellm --version > "$w/guidellm-version.txt" 2>&1; then
    say "GuideLLM does not run from $gsite: $(tail -1 "$w/guidellm-version.txt") (device.sh guidellm-stash g0, g1, then guidellm-install)"
    return 1
  fi
  if [ ! -f "$ref" ]; then  # step 3 was not run on this machine (or it was recycled): measure it here
    say "no step 3 bench on this machine: launch bench first, step 3's workload"
    bench off --profile $prod --concurrency 1,2,4,8,16,32,64 --contexts short,1k --rounds 2 --max-tokens 256 --prompts 8
    ref=$w/bench-off/summary.json
  fi
  cp "$ref" "$w/bench-summary.json" 2>/dev/null
  # I22_GUIDE_LEVELS=1,8,64 runs fewer levels than the bench's (each costs GuideLLM ~5 s besides its requests).
  if ! "${g[@]}" scripts/real-vllm/side_by_side.py workload "$ref" --processor "$model" \
       ${I22_GUIDE_LEVELS:+--levels "$I22_GUIDE_LEVELS"} > "$w/workload.txt" 2> "$w/workload.err"; then
    say "no GuideLLM workload from $ref: $(tail -1 "$w/workload.err")"; return 1
  fi
  local reports=() context text outn levels counts t0 rc
  while read -r context text outn levels counts; do
    t0=$(now); metrics_to "$w/metrics-$context-before.txt"
    # Synthetic prompts of the bench's mean length (the template's tokens come on top, as in the
    # bench's usage), the bench's max_tokens as output tokens, its concurrency levels and counts.
    timeout -k 10 150 "${g[@]}" -m guidellm run \
      --backend "kind=openai_http,target=http://127.0.0.1:$port,model=$prod" \
      --tokenizer "kind=huggingface_auto,model=$model" \
      --data "kind=synthetic_text,prompt_tokens=$text,output_tokens=$outn" \
      --profile kind=concurrent,streams=1 --override profile.streams "$levels" \
      --constraint "{\"kind\": \"max_requests\", \"count\": [$counts]}" \
      --output "kind=json,path=$w/guidellm-$context.json" --output "kind=csv,path=$w/guidellm-$context.csv" \
      --disable-console-interactive > "$w/guidellm-$context.txt" 2>&1; rc=$?
    metrics_to "$w/metrics-$context-after.txt"
    say "guidellm $context: $text text tokens + template, $outn out, c $levels, requests $counts: exit $rc after $(since "$t0") s; prefix cache hits over it: $(prefix_delta "$w/metrics-$context-before.txt" "$w/metrics-$context-after.txt")"
    [ -f "$w/guidellm-$context.json" ] && reports+=("$context=$w/guidellm-$context.json")
  done < "$w/workload.txt"
  [ ${#reports[@]} -gt 0 ] || { say "no GuideLLM report: see guidellm-*.txt"; return 1; }
  python3 scripts/real-vllm/side_by_side.py table "$ref" "${reports[@]}" > "$w/side-by-side.md" 2>&1
  sed 's/^/  /' "$w/side-by-side.md" | tee -a "$out/summary.txt"
}

for n in "${steps[@]}"; do
  w=$work/step$n; rm -rf "$w"; mkdir -p "$w"
  say "start $(date -u +%H:%M:%S); GPU used $(gpu_used) MiB"
  "step$n"
  tar czf "$out/step$n.tgz" -C "$work" "step$n"
done
vllm_procs | grep -v launcher && echo "vLLM processes left (production serves between calls)" | tee -a "$out/summary.txt"
exit 0
