#!/usr/bin/env bash
# Issue 45 on the GPU machine, after `device.sh install` and `device.sh frontdoor` (Caddy + the tiny
# model): tiny-beside (production and the candidate each at 0.3 of the GPU), eight clients through
# the front door while a change is rejected late beside production and one is promoted; the GPUs'
# memory, holders and power limits read every 0.5 s, and whether NVML lets the launcher set a
# power limit here (i45_beside.py).
# Evidence: $OUT/i45-beside.json, $OUT/i45-beside.tgz (history, logs, launcher and door output),
# lines in $OUT/summary.txt.
# Rehearse on the simulator, in namespaces of its own (its ports and pids apart from this host's),
# on a simulated GPU set (created in the work folder unless VLLM_SIM_GPU_SET names one); the
# simulator serves any attention backend, so the late rejection is a tool fault there:
#   PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 REAL_VLLM_HOME=/tmp/i45-home \
#     I45_CHANGE=sim_tool_fault=malformed unshare --pid --net --fork --mount-proc \
#     bash -c 'ip link set lo up; bash scripts/real-vllm/check-i45.sh'
set -u
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PATH=/tmp/gate-site/bin:$PATH
out=${OUT:-/tmp/check-out}; home=${REAL_VLLM_HOME:-/root}; work=/tmp/check-i45
rm -rf "$work"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
sed -i "s|/root/|$home/|" "$work/profiles/"*.toml
if [ -n "${VLLM_GATE_REHEARSAL:-}" ]; then  # no FLASH_ATTN line from the simulator, and its own flags
  export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
  sed -i 's/^order = \["kernel_marker", "health"\]/order = ["health", "tool_call"]/' "$work/profiles/tiny-beside.toml"
  sed -i 's/^\[engine\]$/[engine]\nschema = "none"/' "$work/profiles/tiny-beside.toml"
  if [ -z "${VLLM_SIM_GPU_SET:-}" ]; then  # one 80 GiB GPU, power 100–700 W, settable
    export VLLM_SIM_GPU_SET=$work/gpus
    python3 -c "import sys; from basis.simgpus import create; create(sys.argv[1], 1, 81920)" "$VLLM_SIM_GPU_SET" || exit 2
  fi
fi
# SIGINT before the device call's 600 s: the script's `finally` stops both and writes what it has, and
# the copies below still run (the launchers in its process group get the SIGINT too: they stop).
if [ "${1:-}" = exits ]; then  # i45_exits.py: a SIGKILL during the trial; a change with no room beside
  timeout -s INT -k 40 "${I45_LIMIT_S:-540}" \
    python3 scripts/real-vllm/i45_exits.py --profiles "$work/profiles" --state "$work/state" --out "$work"
  cp "$work/i45-exits.json" "$out/" 2>/dev/null; cat "$work/summary.txt" >> "$out/summary.txt"
  tar czf "$out/i45-exits.tgz" -C /tmp --exclude=state --exclude=profiles --exclude=gpus check-i45; exit 0
fi
timeout -s INT -k 40 "${I45_LIMIT_S:-540}" python3 scripts/real-vllm/i45_beside.py --profiles "$work/profiles" --state "$work/state" --out "$work" \
  --bad-change "${I45_CHANGE:-attention_backend=TRITON_ATTN}"
cp "$work/i45-beside.json" "$out/" 2>/dev/null; cat "$work/summary.txt" >> "$out/summary.txt"
cp -r "$work/state/history.jsonl" "$work/state/profiles/tiny-beside/logs" "$work/" 2>/dev/null
tar czf "$out/i45-beside.tgz" -C /tmp --exclude=state --exclude=profiles --exclude=gpus --exclude=i45-beside.json check-i45
exit 0
