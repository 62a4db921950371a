#!/usr/bin/env bash
# Issue 13 on the GPU machine, after `device.sh install`: the launcher watches the whole engine, and a
# hand-started server is refused with a hint that fits it. Run from the repository root; evidence in
# $OUT/i13.tgz, one line per finding in $OUT/summary.txt. About 4 minutes (each step has its timeouts).
#
#   check-i13.sh [a] [b]   default both
#     a  promote tiny-watch, SIGKILL VLLM::EngineCore, 3 times (re-promoting between): the launcher's
#        reaction (kill -> death recorded in history) and the name it gives; the median of 3
#     b  `vllm serve` by hand on the GPU: `launch try` and `launch --profile` refused (exit 4), with
#        a hint for a server no launcher started
#
# Rehearse off the GPU: VLLM_GATE_REHEARSAL=1 (scripts/real-vllm/README.md) runs it on vllm-sim;
# there b's hand-started server takes the profile's port instead of its GPU (no NVML off the GPU).
set -u
steps=("$@"); [ $# -eq 0 ] && steps=(a b)
for s in "${steps[@]}"; do
  [[ $s =~ ^[ab]$ ]] || { echo "unknown step $s (a, b)" >&2; exit 2; }
done
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/tmp/check-i13; state=/tmp/check-i13-state
rm -rf "$work" "$state"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
L=(python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$state")
model=${REAL_VLLM_HOME:-/root}/tiny
p=tiny-watch
launcher=

say() { echo "[i13 $s] $*" | tee -a "$out/summary.txt"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
gpu_used() { command -v nvidia-smi > /dev/null || { echo n/a; return; }
             nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
gpu_free() { local u; u=$(gpu_used); [ "$u" -lt 2000 ] 2>/dev/null; }
until_true() {  # SECONDS COMMAND...: poll every 0.2 s until it succeeds or time is up
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
status_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))" \
                 "$state/profiles/$p/status.json" "$1" 2>/dev/null; }
phase_in() {  # this run's launcher (not the last one's status) is in one of these phases
  local ph; [ "$(status_field launcher_pid)" = "$launcher" ] || return 1
  ph=$(status_field phase); [[ " $* " == *" $ph "* ]]
}
core_of() {  # API server pid -> its VLLM::EngineCore pid
  python3 -c "import psutil,sys; print(next(c.pid for c in psutil.Process(int(sys.argv[1])).children(recursive=True) if c.name().startswith('VLLM::EngineCore')))" "$1" 2>/dev/null
}
died_record() {  # the last engine_died record: "<noticed epoch>|<how>"
  python3 - "$state/history.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
died = [r for r in rows if r.get("event") == "engine_died"]
print(f"{died[-1].get('noticed_at_epoch')}|{died[-1].get('how')}" if died else "|")
PY
}

step_a() {
  local i api core t0 killed rc rec reactions=()
  for i in 1 2 3; do
    "${L[@]}" --profile $p > "$work/launch-$i.txt" 2>&1 &
    launcher=$!
    t0=$(now)
    if ! until_true 240 phase_in serving failed stopped; then say "run $i: no verdict in 240 s"; kill $launcher; wait $launcher; return 1; fi
    [ "$(status_field phase)" = serving ] || { say "run $i: phase $(status_field phase): $(tail -2 "$work/launch-$i.txt")"; kill $launcher; wait $launcher; return 1; }
    api=$(status_field engine_pid); core=$(core_of "$api")
    say "run $i: promoted after $(since "$t0") s; API server $api, VLLM::EngineCore $core; GPU used $(gpu_used) MiB"
    [ -n "$core" ] || { say "run $i: no VLLM::EngineCore under $api"; kill $launcher; wait $launcher; return 1; }
    killed=$(now); kill -9 "$core"
    timeout 90 tail --pid=$launcher -f /dev/null || kill $launcher
    wait $launcher; rc=$?
    rec=$(died_record)
    local reaction; reaction=$(python3 -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):.3f}')" "${rec%%|*}" "$killed" 2>/dev/null || echo n/a)
    reactions+=("$reaction")
    say "run $i: SIGKILL VLLM::EngineCore $core -> recorded after $reaction s: \"${rec#*|}\"; launch exit $rc (5 expected); GPU used $(gpu_used) MiB"
    command -v nvidia-smi > /dev/null && until_true 60 gpu_free  # the next start needs the memory back
  done
  say "reaction kill -> death recorded, median of 3: $(printf '%s\n' "${reactions[@]}" | sort -n | sed -n 2p) s (runs: ${reactions[*]})"
}

step_b() {
  local api t0 rc port=8013
  # Without a GPU (a rehearsal) nothing is "on the same GPU": the same port stands in for it.
  [ -n "${VLLM_GATE_REHEARSAL:-}" ] && port=8011
  setsid python3 -m vllm.entrypoints.cli.main serve "$model" --served-model-name tiny --max-model-len 2048 \
    --gpu-memory-utilization 0.2 --enforce-eager --port "$port" > "$work/hand-vllm.log" 2>&1 &
  api=$!
  if ! until_true 300 grep -q 'Application startup complete' "$work/hand-vllm.log"; then
    say "hand-started vLLM did not start: $(tail -2 "$work/hand-vllm.log")"; kill -9 -- -"$api"; return 1; fi
  say "vllm serve by hand: pid $api; GPU used $(gpu_used) MiB"
  t0=$(now)
  timeout 120 "${L[@]}" try --profile $p > "$work/try-refused.txt" 2>&1; rc=$?
  say "launch try --profile $p: exit $rc (4 expected) after $(since "$t0") s"
  grep -E '^(error|hint):' "$work/try-refused.txt" | cut -c1-400 | sed 's/^/  /' | tee -a "$out/summary.txt"
  t0=$(now)
  timeout 120 "${L[@]}" --profile $p > "$work/launch-refused.txt" 2>&1; rc=$?
  say "launch --profile $p: exit $rc (4 expected) after $(since "$t0") s"
  grep -E '^(error|hint):' "$work/launch-refused.txt" | cut -c1-400 | sed 's/^/  /' | tee -a "$out/summary.txt"
  kill -TERM -- -"$api"; until_true 60 bash -c "! kill -0 $api 2>/dev/null" || kill -9 -- -"$api"
  wait "$api" 2>/dev/null
  say "hand-started server ended (its group, which this script started); GPU used $(gpu_used) MiB"
}

for s in "${steps[@]}"; do
  say "start $(date -u +%H:%M:%S); GPU used $(gpu_used) MiB"
  "step_$s"
done
cp -r "$state/history.jsonl" "$state/profiles/$p/logs" "$work/" 2>/dev/null
tar czf "$out/i13.tgz" -C /tmp check-i13
exit 0
