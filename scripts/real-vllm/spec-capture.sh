#!/usr/bin/env bash
# The capture-size rule on the real vLLM for a drafter other than ngram, after `device.sh install`:
# `launch dry-run` and `launch try` of the profile tiny-draft (the tiny model drafting for itself).
# The graph_capture gate judges the capture with vllm_flags/cudagraph_sizes.py; the log's own
# `Profiling CUDA graph memory` line and bars say what vLLM did. Evidence in $OUT (default
# /tmp/spec-out): summary.txt, the report, the log and its facts.
#
# Rehearse off the GPU: VLLM_GATE_REHEARSAL=1 runs vllm-sim --sim-vllm-version 0.26 instead.
set -u
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/spec-out}; work=/tmp/spec-capture; state=/tmp/spec-state; p=tiny-draft
mkdir -p "$out" "$work"; rm -rf "$work/profiles" "$state"; cp -r scripts/real-vllm/profiles "$work/profiles"
L=(python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$state")
say() { echo "[spec-capture] $*" | tee -a "$out/summary.txt"; }

"${L[@]}" --profile $p --dry-run > "$out/dry-run.txt" 2>&1
say "dry run: $(grep -c '^warning' "$out/dry-run.txt") warning(s)"
grep -E 'capture|graphs' "$out/dry-run.txt" | sed 's/^/  /' | tee -a "$out/summary.txt"
start=$SECONDS
timeout -k 30 420 "${L[@]}" try --profile $p --json > "$out/try-$p.json" 2> "$out/try-$p.txt"
say "launch try $p: exit $? after $((SECONDS - start)) s"
cp "$state/profiles/$p/logs/try.log" "$out/try-$p.log" 2>/dev/null
"${L[@]}" parse-log "$out/try-$p.log" > "$out/facts-$p.txt" 2>&1
python3 - "$out/try-$p.json" <<'PY' | tee -a "$out/summary.txt"
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"  no report: {err}")
for gate in report["gates"]:
    print(f"  {gate['name']}: {gate['verdict']}: {gate['summary'][:300]}")
PY
grep -hoE "Model Runner V2 does not yet support [^;]*|Profiling CUDA graph memory: .*|'cudagraph_capture_sizes': \[[0-9, ]*\]" \
  "$out/try-$p.log" | sort -u | sed 's/^/  log: /' | tee -a "$out/summary.txt"
