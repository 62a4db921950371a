#!/usr/bin/env bash
# Issue 42 on the GPU machine, after `device.sh install`: does the serving watch tell the truth in
# seconds, under traffic? tiny-hang (tiny, eager, max_num_seqs 4, V1 runner, hang_lp.py's logits
# processor) served by the launcher with the watch on; i42_watch.py's modes, one or more:
#   check-i42.sh MODE[,MODE...]|all   MODE: prefill queue soft stop, run in the order given (all: this one)
#     prefill  which /metrics series (and the engine core's CPU) move during a long chunked prefill
#     queue    32 clients on 4 slots for 60 s: no verdict expected
#     soft     the logits processor blocks (state S), idle and under 4 streams, I42_RUNS each
#     stop     SIGSTOP of VLLM::EngineCore, idle and under 4 streams, I42_RUNS each
# Knobs: I42_RUNS (3), I42_LIMIT_S (560: SIGINT, then what was measured is written), I42_ON_WEDGE
# (restart; `log` keeps the engine and takes the fault away instead: no restart per run; rehearse it
# with `stop` only: the simulator's stall of the soft mode never goes away),
# I42_QUEUE_S (60), I42_QUEUE_TOKENS (1024), I42_STREAM_TOKENS (4000).
# Evidence: $OUT/i42.json, $OUT/i42.tgz (history, incidents, logs, launcher output), $OUT/summary.txt.
# Rehearse on the simulator, in namespaces of its own (its pids and ports apart from this host's); the
# simulator loads no logits processor, so the soft mode runs with its --sim-stall-after-tokens 4 (the
# engine hangs at a decode step once it generated 4 tokens: the streams' first ones, or the second
# canary's) standing in for the flag:
#   mkdir -p /tmp/i42-home/tiny && echo '{"max_position_embeddings": 4096, "model_type": "qwen2"}' > /tmp/i42-home/tiny/config.json
#   PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 REAL_VLLM_HOME=/tmp/i42-home VLLM_SIM_STARTUP_SPEED=10 \
#     unshare --pid --net --fork --mount-proc bash -c 'ip link set lo up; bash scripts/real-vllm/check-i42.sh all'
set -u
modes=${1:-}
[ "$modes" = all ] && modes=prefill,queue,soft,stop
[[ $modes =~ ^(prefill|queue|soft|stop)(,(prefill|queue|soft|stop))*$ ]] || {
  echo "usage: check-i42.sh prefill|queue|soft|stop[,...]|all" >&2; exit 2; }
runs=${I42_RUNS:-3}; [[ $runs =~ ^[1-9]$ ]] || { echo "I42_RUNS: 1-9" >&2; exit 2; }
on_wedge=${I42_ON_WEDGE:-restart}; [[ $on_wedge =~ ^(restart|log)$ ]] || { echo "I42_ON_WEDGE: restart|log" >&2; exit 2; }
for knob in I42_LIMIT_S I42_QUEUE_S I42_QUEUE_TOKENS I42_STREAM_TOKENS; do
  [[ ${!knob:-1} =~ ^[1-9][0-9]{0,4}$ ]] || { echo "$knob: a whole number of 1-99999" >&2; exit 2; }
done
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; home=${REAL_VLLM_HOME:-/root}; work=/tmp/check-i42
rm -rf "$work"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
p=$work/profiles/tiny-hang.toml
sed -i "s|/root/|$home/|" "$work/profiles/"*.toml
# What this script's processes import, then hang_lp.py's folder (the profile's value replaces the
# inherited PYTHONPATH); the flag in this run's folder; what a verdict does.
sed -i "s|^PYTHONPATH = .*|PYTHONPATH = \"$PYTHONPATH:$repo/scripts/real-vllm\"|" "$p"
sed -i "s|^HANG_LP_FLAG = .*|HANG_LP_FLAG = \"$work/hang.flag\"|" "$p"
sed -i "s|^on_wedge = .*|on_wedge = \"$on_wedge\"|" "$p"
soft_env=()
if [ -n "${VLLM_GATE_REHEARSAL:-}" ]; then  # no FLASH_ATTN line from the simulator, no logits processor
  sed -i 's/^order = \["kernel_marker", "health"\]/order = ["health"]/' "$p"
  soft_env=(--soft-env VLLM_SIM_STALL_AFTER_TOKENS=4)
fi
echo "check-i42: modes $modes, runs $runs, on_wedge $on_wedge, limit ${I42_LIMIT_S:-560} s"
# SIGINT before the device call's 600 s: the script's `finally` stops the launcher and writes what it
# has (the launcher in its process group gets the SIGINT too, and stops its engine).
timeout -s INT -k 40 "${I42_LIMIT_S:-560}" python3 scripts/real-vllm/i42_watch.py --profiles "$work/profiles" \
  --state "$work/state" --out "$work" --modes "$modes" --runs "$runs" --queue-s "${I42_QUEUE_S:-60}" \
  --queue-tokens "${I42_QUEUE_TOKENS:-1024}" --stream-tokens "${I42_STREAM_TOKENS:-4000}" "${soft_env[@]}"
cp "$work/i42.json" "$out/" 2>/dev/null; cat "$work/summary.txt" >> "$out/summary.txt" 2>/dev/null
cp -r "$work/state/history.jsonl" "$work/state/profiles/tiny-hang/incidents" "$work/state/profiles/tiny-hang/logs" \
  "$work/" 2>/dev/null
tar czf "$out/i42.tgz" -C /tmp --exclude=state --exclude=profiles --exclude=i42.json check-i42
exit 0
