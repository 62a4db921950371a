#!/usr/bin/env bash
# Issue 41 on the GPU machine, after `device.sh install` (and `device.sh frontdoor`: Caddy + the tiny
# model): changes under traffic through the front door (i41_frontdoor.py).
#   check-i41.sh sleep   tiny-door: a change rejected late, put back, a change promoted, the keep test
#   check-i41.sh stop    tiny-door-stop: a change rejected late, last-good started cold
# Evidence: $OUT/i41-PHASE.json, $OUT/i41-PHASE.tgz (history, logs), lines in $OUT/summary.txt.
# Rehearse (the simulator serves any attention backend, so the late rejection is a tool fault there):
#   PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 REAL_VLLM_HOME=/tmp/i41-home \
#     I41_CHANGE=sim_tool_fault=malformed unshare -pf --mount-proc bash scripts/real-vllm/check-i41.sh sleep
set -u
phase=${1:-}
[[ $phase =~ ^(sleep|stop)$ ]] || { echo "usage: check-i41.sh sleep|stop" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PATH=/tmp/gate-site/bin:$PATH
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; home=${REAL_VLLM_HOME:-/root}; work=/tmp/check-i41-$phase
rm -rf "$work"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
sed -i "s|/root/|$home/|" "$work/profiles/"*.toml
if [ -n "${VLLM_GATE_REHEARSAL:-}" ]; then  # no FLASH_ATTN line from the simulator, and its own flags
  sed -i 's/^order = \["kernel_marker", "health"\]/order = ["health", "tool_call"]/' "$work/profiles/tiny-door.toml"
  sed -i 's/^\[engine\]$/[engine]\nschema = "none"/' "$work/profiles/tiny-door.toml"
fi
profile=tiny-door; [ "$phase" = stop ] && profile=tiny-door-stop
python3 scripts/real-vllm/i41_frontdoor.py --profiles "$work/profiles" --state "$work/state" --out "$work" \
  --profile "$profile" --phase "$phase" --bad-change "${I41_CHANGE:-attention_backend=TRITON_ATTN}"
cp "$work/i41-$phase.json" "$out/" 2>/dev/null; cat "$work/summary.txt" >> "$out/summary.txt"
cp -r "$work/state/history.jsonl" "$work/state/profiles/$profile/logs" "$work/" 2>/dev/null
tar czf "$out/i41-$phase.tgz" -C /tmp --exclude=state --exclude=profiles "check-i41-$phase"
exit 0
