#!/usr/bin/env bash
# Issue 32 on the GPU machine, after `device.sh install`: a rejected change with park = "sleep" and
# with "stop" (i32_park.py), for tiny-chat and for a random 2.84 B Qwen2 built here (make_big.py).
#   check-i32.sh CASE [RUNS]
#     tiny-sleep   tiny-chat-sleep, max_model_len=40960 (vLLM refuses it at startup), RUNS times
#     tiny-stop    tiny-chat-stop, the same change once
#     big-sleep    big-sleep (built first if missing), max_model_len=40960 (vLLM refuses it), RUNS times
#     big-stop     big-stop, the same change once
# Evidence: $OUT/i32-PROFILE.json, $OUT/i32-CASE.tgz (history, logs), lines in $OUT/summary.txt.
# (I32_CHANGE replaces the change: the simulator serves any tool parser, so a rehearsal uses
# I32_CHANGE=sim_tool_fault=malformed.) Rehearse: PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 REAL_VLLM_HOME=/tmp/i32-home unshare -pf --mount-proc bash scripts/real-vllm/check-i32.sh tiny-sleep 1
set -u
case=${1:-}; runs=${2:-3}
[[ $case =~ ^(tiny|big)-(sleep|stop)$ ]] || { echo "usage: check-i32.sh tiny-sleep|tiny-stop|big-sleep|big-stop [RUNS]" >&2; exit 2; }
[[ $runs =~ ^[1-9]$ ]] || { echo "RUNS: 1-9" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; home=${REAL_VLLM_HOME:-/root}; work=/tmp/check-i32-$case
rm -rf "$work"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
sed -i "s|/root/|$home/|" "$work/profiles/"*.toml
[ "${case#*-}" = stop ] && runs=1
if [ "${case%-*}" = tiny ]; then
  profile=tiny-chat-${case#*-}; model=tiny-chat; port=8012; change=${I32_CHANGE:-max_model_len=40960}
else
  profile=big-${case#*-}; model=big; port=8014; change=${I32_CHANGE:-max_model_len=40960}
  if [ ! -f "$home/big/config.json" ]; then
    python3 scripts/real-vllm/make_big.py "$home/big" "$home/tiny-chat" 2>&1 | tail -1 | tee -a "$out/summary.txt"
  fi
fi
python3 scripts/real-vllm/i32_park.py --profiles "$work/profiles" --state "$work/state" --out "$work" \
  --profile "$profile" --model "$model" --port "$port" --change "$change" --runs "$runs"
cp "$work/i32-$profile.json" "$out/" 2>/dev/null; cat "$work/summary.txt" >> "$out/summary.txt"
cp -r "$work/state/history.jsonl" "$work/state/profiles/$profile/logs" "$work/" 2>/dev/null
tar czf "$out/i32-$case.tgz" -C /tmp --exclude=state --exclude=profiles "check-i32-$case"
exit 0
