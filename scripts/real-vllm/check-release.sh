#!/usr/bin/env bash
# A vLLM release judged by the real `launch` on the GPU machine: issue 9's six checks, after
# `device.sh install`. Run from the repository root; each step's evidence goes to $OUT/stepN.tgz and
# one line per finding to $OUT/summary.txt (the device returns at most 8 files a call).
#
#   check-release.sh [STEP...]   steps 1-6, default all; about 2, 2, 2, 2, 4 and 1 minutes
#     1  launch try tiny: kernel_marker, graph_capture, health, memory_leak pass; tool_call's verdict
#     2  launch try tiny-ngram: capture sizes [1,2,4,8] + ngram, expected vs captured
#     3  another process holds 120 GiB: preflight refuses; with --skip-preflight vLLM's own error
#     4  SIGKILL the API server only: the engine lives on; preflight names it; --reap-orphans
#     5  promote tiny-serve; `launch set` a parser typo: refused; a context vLLM rejects --apply:
#        rejected, last-good serves;
#        then SIGKILL launch itself: what lives on, named and reaped
#     6  the simulator (0.26 dialect) against this run's logs (fidelity.py)
#
# Rehearse off the GPU: VLLM_GATE_REHEARSAL=1 puts scripts/real-vllm/rehearsal (a `vllm` module that
# runs vllm-sim --sim-vllm-version 0.26) on the path; step 3 needs torch and a GPU and is skipped.
set -u
steps=("$@"); [ $# -eq 0 ] && steps=(1 2 3 4 5 6)
for n in "${steps[@]}"; do  # before anything is written or started
  [[ $n =~ ^[1-6]$ ]] || { echo "unknown step $n (1-6)" >&2; exit 2; }
done
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/tmp/check-release; state=/tmp/check-state
mkdir -p "$out" "$work"
# The profiles are copied: step 5 edits one with `launch set`, and the checkout must stay as it was.
rm -rf "$work/profiles"; cp -r scripts/real-vllm/profiles "$work/profiles"
L=(python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$state")
model=${REAL_VLLM_HOME:-/root}/tiny

say() { echo "[step $n] $*" | tee -a "$out/summary.txt"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 || echo n/a; }
gpu_apps() { nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>/dev/null; }
vllm_procs() { ps -eo pid,ppid,pgid,etimes,rss,args | grep -E 'VLLM::|vllm\.entrypoints|launcher\.cli' | grep -v grep; }
until_true() {  # SECONDS COMMAND...: poll the command every 0.5 s until it succeeds or time is up
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.5; done
}
phase_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('phase'))" \
             "$state/profiles/$1/status.json" 2>/dev/null; }
phase_in() { local p; p=$(phase_of "$1"); shift; [[ " $* " == *" $p "* ]]; }
verdicts() {  # one line per gate from a `launch try --json` report
  python3 - "$1" <<'EOF'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"no report: {err}")
for gate in report["gates"]:
    print(f"  {gate['name']}: {gate['verdict']} ({gate['duration_s']:.1f} s): {gate['summary'][:400]}")
EOF
}

try_profile() {  # PROFILE SECONDS [try options]: launch try, its log, facts and what the stop left
  local p=$1 secs=$2; shift 2
  local t0; t0=$(now)
  timeout -k 30 "$secs" "${L[@]}" try --profile "$p" --json "$@" > "$w/try-$p.json" 2> "$w/try-$p.txt"
  local rc=$?
  cp "$state/profiles/$p/logs/try.log" "$w/try-$p.log" 2>/dev/null
  "${L[@]}" parse-log "$w/try-$p.log" > "$w/facts-$p.txt" 2>&1
  say "launch try $p $*: exit $rc after $(since "$t0") s"
  verdicts "$w/try-$p.json" | tee -a "$out/summary.txt"
  grep -E '^(KV pool|CUDA graphs|startup|load) ' "$w/facts-$p.txt" | sed 's/^/  facts: /' | tee -a "$out/summary.txt"
  say "after the stop: $(vllm_procs | grep -cv launcher) vLLM processes, GPU used $(gpu_used) MiB"
}

serve_by_hand() {  # PORT LOG: `vllm serve` in its own session, as an operator would; pid -> $api
  setsid python3 -m vllm.entrypoints.cli.main serve "$model" --served-model-name tiny --max-model-len 2048 \
    --gpu-memory-utilization 0.2 --port "$1" > "$2" 2>&1 &
  api=$!
}

step1() { try_profile tiny 480; }

step2() { try_profile tiny-ngram 300; }

step3() {
  rm -f /tmp/held
  python3 -c "import torch, time; x = torch.empty(120 * 2**30, dtype=torch.uint8, device='cuda')
open('/tmp/held', 'w').write('1'); time.sleep(900)" 2> "$w/hog.txt" &
  local hog=$!
  if ! until_true 120 test -f /tmp/held; then say "skipped: no 120 GiB allocation ($(tail -1 "$w/hog.txt"))"
    kill $hog 2>/dev/null; return 0; fi
  say "pid $hog holds 120 GiB (torch); GPU used $(gpu_used) MiB"
  local t0; t0=$(now)
  "${L[@]}" preflight --profile tiny > "$w/preflight.txt" 2>&1; local rc=$?
  say "launch preflight --profile tiny: exit $rc after $(since "$t0") s"
  grep -E 'refused|GPU 0' "$w/preflight.txt" | head -3 | sed 's/^/  /' | tee -a "$out/summary.txt"
  rm -rf "$state/profiles/tiny/logs"
  t0=$(now)
  "${L[@]}" try --profile tiny > "$w/try-refused.txt" 2>&1; rc=$?
  say "launch try --profile tiny: exit $rc after $(since "$t0") s; vLLM started: $([ -f "$state/profiles/tiny/logs/try.log" ] && echo yes || echo no)"
  try_profile tiny 240 --skip-preflight
  kill $hog; wait $hog 2>/dev/null
  until_true 60 test "$(gpu_used)" -lt 2000
  say "hog ended; GPU used $(gpu_used) MiB"
}

step4() {
  local api t0 rc
  serve_by_hand 8013 "$w/vllm.log"
  if ! until_true 400 grep -q 'Application startup complete' "$w/vllm.log"; then
    say "vLLM did not start: $(tail -3 "$w/vllm.log")"; kill -9 -- -"$api"; return 1; fi
  { echo "--- serving"; vllm_procs; gpu_apps; } > "$w/procs.txt"
  kill -9 "$api"; wait "$api" 2>/dev/null
  sleep 5  # the engine would notice its parent's death within this, if it watched for it
  { echo "--- 5 s after SIGKILL of the API server $api"; vllm_procs; gpu_apps; } >> "$w/procs.txt"
  say "SIGKILL API server $api; 5 s later: $(vllm_procs | grep -cv launcher) vLLM processes, GPU used $(gpu_used) MiB"
  gpu_apps | sed 's/^/  /' | tee -a "$out/summary.txt"
  t0=$(now)
  "${L[@]}" preflight --profile tiny > "$w/preflight.txt" 2>&1; rc=$?
  say "launch preflight: exit $rc after $(since "$t0") s"
  grep -E 'refused|orphan' "$w/preflight.txt" | head -4 | sed 's/^/  /' | tee -a "$out/summary.txt"
  "${L[@]}" preflight --profile tiny --json > "$w/preflight.json" 2>&1
  t0=$(now)
  "${L[@]}" preflight --profile tiny --reap-orphans > "$w/reap.txt" 2>&1; rc=$?
  say "launch preflight --reap-orphans: exit $rc after $(since "$t0") s; then $(vllm_procs | grep -cv launcher) vLLM processes, GPU used $(gpu_used) MiB"
  grep -E 'reaped|gpu_memory|  orphans' "$w/reap.txt" | head -6 | sed 's/^/  /' | tee -a "$out/summary.txt"
}

step5() {
  local p=tiny-serve t0 rc launcher port=8011
  rm -rf "${state:?}/profiles/$p" "$state"/restart-guard* 2>/dev/null  # a fresh start: no old status or failures
  "${L[@]}" --profile $p > "$w/launch.txt" 2>&1 &
  launcher=$!
  t0=$(now)
  if ! until_true 480 phase_in $p serving failed stopped; then say "no verdict in 480 s"; fi
  say "launch --profile $p: phase $(phase_of $p) after $(since "$t0") s"
  [ "$(phase_of $p)" = serving ] || { kill $launcher; wait $launcher; return 1; }
  cp "$state/profiles/$p/status.json" "$w/status-promoted.json"
  # A parser vLLM does not register is refused before anything stops (exit 2, nothing written)...
  t0=$(now)
  "${L[@]}" set $p tool_call_parser=hermez --tag typo --apply > "$w/set-typo.txt" 2>&1; rc=$?
  say "launch set $p tool_call_parser=hermez --tag typo --apply: exit $rc after $(since "$t0") s (2 = refused, nothing written)"
  grep -m1 'hermez' "$w/set-typo.txt" | sed 's/^/  /' | tee -a "$out/summary.txt"
  if [ $rc != 2 ]; then  # parser names come from an installed vLLM only (a rehearsal has none)
    "${L[@]}" rollback typo --profile $p >> "$w/set-typo.txt" 2>&1
    say "not refused here (no vLLM to read parser names from): rolled back, exit $?"
  fi
  # ...so the rollback needs a change only vLLM itself rejects: a context longer than the model's
  # (max_position_embeddings 4096), refused by vLLM's config validation after its imports.
  t0=$(now)
  "${L[@]}" set $p max_model_len=8192 --tag bad --apply --timeout-s 480 > "$w/set.txt" 2>&1; rc=$?
  say "launch set $p max_model_len=8192 --tag bad --apply: exit $rc after $(since "$t0") s (3 = rolled back)"
  tail -4 "$w/set.txt" | sed 's/^/  /' | tee -a "$out/summary.txt"
  until_true 60 phase_in $p serving_last_good serving
  local models; models=$(curl -s -m 5 "http://127.0.0.1:$port/v1/models" | head -c 300)
  say "phase $(phase_of $p); /v1/models: $models"
  "${L[@]}" status --json > "$w/status.json" 2>&1
  "${L[@]}" history --profile $p > "$w/history.txt" 2>&1
  cp "$work/profiles/$p.toml"* "$w/" 2>/dev/null
  # launch itself killed: SIGTERM stops the engine's group (every try above shows it). SIGKILL cannot
  # be caught: the kernel's parent-death signal (engine.py) SIGTERMs the API server, which stops its
  # engine; whatever is still there after 60 s is for the next preflight to name and reap.
  { echo "--- serving last-good"; vllm_procs; gpu_apps; } > "$w/procs.txt"
  kill -9 $launcher; wait $launcher 2>/dev/null
  t0=$(now)
  until_true 60 test "$(vllm_procs | grep -cv launcher)" = 0
  { echo "--- $(since "$t0") s after SIGKILL of launch $launcher"; vllm_procs; gpu_apps; } >> "$w/procs.txt"
  say "SIGKILL launch $launcher: after $(since "$t0") s $(vllm_procs | grep -cv launcher) vLLM processes left, GPU used $(gpu_used) MiB"
  "${L[@]}" preflight --profile $p > "$w/preflight.txt" 2>&1; rc=$?
  say "launch preflight: exit $rc"
  grep -E 'orphan' "$w/preflight.txt" | head -3 | sed 's/^/  /' | tee -a "$out/summary.txt"
  t0=$(now)
  "${L[@]}" preflight --profile $p --reap-orphans > "$w/reap.txt" 2>&1; rc=$?
  say "launch preflight --reap-orphans: exit $rc after $(since "$t0") s; then $(vllm_procs | grep -cv launcher) vLLM processes, GPU used $(gpu_used) MiB"
  grep -E 'reaped|gpu_memory|  orphans' "$w/reap.txt" | head -6 | sed 's/^/  /' | tee -a "$out/summary.txt"
}

step6() {
  printf '#!/bin/sh\nexec python3 -m vllm_sim.cli "$@"\n' > "$work/vllm-sim"; chmod +x "$work/vllm-sim"
  local p log
  for p in tiny tiny-ngram; do
    log=$work/step$([ $p = tiny ] && echo 1 || echo 2)/try-$p.log
    [ -f "$log" ] || { say "no log of $p from this run (step 1/2 first)"; continue; }
    python3 scripts/real-vllm/fidelity.py "$log" --profile $p --sim "$work/vllm-sim" --keep "$w" > "$w/fidelity-$p.txt" 2>&1
    say "simulator vs real log of $p: exit $? (0 = no differences)"
    grep -E 'DIFF' "$w/fidelity-$p.txt" | head -12 | sed 's/^/  /' | tee -a "$out/summary.txt"
  done
}

for n in "${steps[@]}"; do
  w=$work/step$n; rm -rf "$w"; mkdir -p "$w"
  [ -n "${VLLM_GATE_REHEARSAL:-}" ] && [ "$n" = 3 ] && { say "skipped in a rehearsal (torch, GPU)"; continue; }
  say "start $(date -u +%H:%M:%S); GPU used $(gpu_used) MiB"
  "step$n"
  tar czf "$out/step$n.tgz" -C "$work" "step$n"
done
vllm_procs | grep -v launcher && echo "WARNING: vLLM processes left" | tee -a "$out/summary.txt"
exit 0
