#!/usr/bin/env bash
# Issue 21's gate overhead on the real vLLM 0.26.0, after `device.sh install` (about 2-3 minutes):
# one `launch --profile i21-chain` start of the tiny model, timed from the engine's first /health 200
# to the chain's verdict (kernel_marker, graph_capture, health, tool_call with `required` and `named`,
# which a random-weight model passes through structured output); then the five tool-call cases sent
# by hand against that engine, one after another (the gate before issue 21) and all at once (now).
# Evidence: $OUT/i21.tgz (launcher output, history, engine log, gate-timing.json), $OUT/summary.txt.
#
# Rehearse off the GPU: VLLM_GATE_REHEARSAL=1 puts scripts/real-vllm/rehearsal (a `vllm` module that
# runs vllm-sim --sim-vllm-version 0.26) on the path.
set -u
[ $# -eq 0 ] || { echo "usage: check-i21.sh (no arguments)" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/tmp/check-i21
mkdir -p "$out"; rm -rf "$work"; mkdir -p "$work"
# The profiles are copied (as check-release.sh does): the checkout stays as it was.
cp -r scripts/real-vllm/profiles "$work/profiles"
cat > "$work/profiles/i21-chain.toml" <<'TOML'
# tiny, gated by every gate that needs no traffic window: the chain whose overhead issue 21 measures.
extends = "tiny"
description = "tiny on real vLLM 0.26.0: kernel_marker, graph_capture, health, tool_call (required, named)"

[gates]
order = ["kernel_marker", "graph_capture", "health", "tool_call"]
TOML
say() { echo "[i21] $*" | tee -a "$out/summary.txt"; }
vllm_procs() { ps -eo pid,ppid,pgid,etimes,rss,args | grep -E 'VLLM::|vllm\.entrypoints|launcher\.cli' | grep -v grep; }

say "start $(date -u +%H:%M:%S); $(nvidia-smi --query-gpu=name,memory.used --format=csv,noheader 2>/dev/null || echo 'no GPU')"
timeout -k 30 420 python3 scripts/real-vllm/gate_timing.py "$work" i21-chain 8011 --repeats 2 2>&1 \
  | tee "$work/gate-timing.txt" | sed 's/^/  /' | tee -a "$out/summary.txt"
say "gate_timing.py: exit ${PIPESTATUS[0]}; end $(date -u +%H:%M:%S)"
cp "$work/state/profiles/i21-chain/logs/engine.log" "$work/engine.log" 2>/dev/null
cp "$work/state/history.jsonl" "$work/history.jsonl" 2>/dev/null
tar czf "$out/i21.tgz" -C "$work" --exclude=state --exclude=profiles .
for _ in $(seq 1 20); do vllm_procs | grep -qv launcher || break; sleep 0.5; done  # a stop takes a moment
vllm_procs | grep -v launcher && say "WARNING: vLLM processes left 10 s after the stop"
exit 0
