#!/usr/bin/env bash
# Issue 31 on the GPU machine, after `device.sh install`: the serving watch against the real vLLM's
# hangs (i31_watch.py: SIGSTOP of VLLM::EngineCore RUNS times, of the API server once, SIGKILL of the
# engine core once). Evidence in $OUT/i31.tgz and $OUT/i31.json, findings in $OUT/summary.txt.
#   check-i31.sh [STEPS] [RUNS]      STEPS default core,api,kill; RUNS default 3
# Rehearse off the GPU: PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 unshare -pf --mount-proc bash scripts/real-vllm/check-i31.sh
set -u
steps=${1:-core,api,kill}; runs=${2:-3}
[[ $steps =~ ^(core|api|kill)(,(core|api|kill))*$ ]] || { echo "usage: check-i31.sh [core,api,kill] [RUNS]" >&2; exit 2; }
[[ $runs =~ ^[1-9]$ ]] || { echo "RUNS: 1-9" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/tmp/check-i31; home=${REAL_VLLM_HOME:-/root}
rm -rf "$work"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
sed -i "s|/root/tiny-chat|$home/tiny-chat|" "$work/profiles/tiny-chat.toml"
python3 scripts/real-vllm/i31_watch.py --profiles "$work/profiles" --state "$work/state" --out "$work" \
  --profile tiny-chat-watch --model tiny-chat --steps "$steps" --runs "$runs"
cp "$work/i31.json" "$out/"; cat "$work/summary.txt" >> "$out/summary.txt"
cp -r "$work/state/history.jsonl" "$work/state/profiles/tiny-chat-watch/incidents" "$work/state/profiles/tiny-chat-watch/logs" "$work/" 2>/dev/null
tar czf "$out/i31.tgz" -C /tmp --exclude=state check-i31
exit 0
