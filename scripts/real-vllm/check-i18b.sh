#!/usr/bin/env bash
# Issue 18 point 1 on the real vLLM 0.26.0, after `device.sh install` (about 2-3 minutes): vLLM's
# output survives the launcher's death. Two starts of tiny-watch (eager, promoted in seconds), with
# the API key from an environment variable: (a) the launcher is stopped with SIGTERM (the reference:
# the shutdown lines a graceful stop logs); (b) the launcher is SIGKILLed. For (b): the lines the log
# keeper wrote after the kill, the `[shutdown]` lines of (a) that are missing from (b) (pids and times
# aside), the seconds until the engine and the keeper were gone, and whether the key is anywhere in
# the log. Evidence: $OUT/i18b.tgz (both engine logs, launcher output), $OUT/summary.txt `[i18b]`.
#
# Rehearse off the GPU: PATH=$PWD/.venv/bin:$PATH VLLM_GATE_REHEARSAL=1 bash scripts/real-vllm/check-i18b.sh
set -u
[ $# -eq 0 ] || { echo "usage: check-i18b.sh (no arguments)" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/tmp/check-i18b
rm -rf "$work"; mkdir -p "$out" "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
cat > "$work/profiles/i18b.toml" <<'TOML'
# tiny-watch with the API key taken from $I18B_KEY (vLLM gets it as VLLM_API_KEY).
extends = "tiny-watch"
description = "tiny on real vLLM 0.26.0, eager, keyed: issue 18's SIGKILLed-launcher log check"

[engine]
api_key_env = "I18B_KEY"
TOML
export I18B_KEY=sk-i18b-$$-7f3e9a1c
p=i18b

say() { echo "[i18b] $*" | tee -a "$out/summary.txt"; }
until_true() {  # SECONDS COMMAND...: poll every 0.2 s until it succeeds or time is up
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))" \
          "$1/profiles/$p/status.json" "$2" 2>/dev/null; }
serving() { [ "$(field "$1" launcher_pid)" = "$2" ] && [ "$(field "$1" phase)" = serving ]; }
keeper_of() { ps -o pid=,args= --ppid "$1" | grep 'launcher.supervisor.logkeeper' | awk '{print $1}'; }
group_gone() { [ -z "$(ps -o pid= -g "$1" 2>/dev/null)" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
shutdown_lines() {  # the [shutdown] lines of a log, without pids and times
  grep -a '\[shutdown\]' "$1" | sed -E 's/pid=[0-9]+/pid=N/; s/ [0-9]{2}-[0-9]{2} [0-9:]{8} / /' | sort
}

run() {  # NAME SIGNAL: start, wait for serving, signal the launcher, wait for the ends
  local name=$1 sig=$2 state=$work/state-$1 launcher api keeper before t0 log
  python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$state" --profile $p \
    > "$work/launch-$name.txt" 2>&1 &
  launcher=$!
  if ! until_true 240 serving "$state" "$launcher"; then
    say "$name: not serving in 240 s: $(tail -2 "$work/launch-$name.txt")"; kill $launcher; wait $launcher; return 1
  fi
  api=$(field "$state" engine_pid); keeper=$(keeper_of "$launcher"); log=$state/profiles/$p/logs/engine.log
  before=$(wc -l < "$log")
  t0=$SECONDS
  kill -"$sig" "$launcher"; wait "$launcher"
  say "$name: launcher $launcher got SIG$sig (exit $?); API server $api, log keeper ${keeper:-none}; engine.log had $before lines"
  until_true 120 group_gone "$api" || say "$name: WARNING: engine group $api still there after 120 s"
  say "$name: engine group gone after $((SECONDS - t0)) s"
  if [ -n "$keeper" ]; then
    until_true 60 gone "$keeper" || say "$name: WARNING: log keeper $keeper still there after 60 s"
    say "$name: log keeper gone after $((SECONDS - t0)) s"
  fi
  say "$name: engine.log now $(wc -l < "$log") lines ($(( $(wc -l < "$log") - before )) written after the signal)"
  grep -qa "$I18B_KEY" "$log" && say "$name: FAIL: the API key is in engine.log" || say "$name: the API key is not in engine.log"
  cp "$log" "$work/engine-$name.log"
  shutdown_lines "$log" > "$work/shutdown-$name.txt"
}

say "start $(date -u +%H:%M:%S); $(nvidia-smi --query-gpu=name,memory.used --format=csv,noheader 2>/dev/null || echo 'no GPU')"
run sigterm TERM
run sigkill KILL
if [ -s "$work/shutdown-sigterm.txt" ]; then
  missing=$(comm -23 "$work/shutdown-sigterm.txt" "$work/shutdown-sigkill.txt" | wc -l)
  say "[shutdown] lines: $(wc -l < "$work/shutdown-sigterm.txt") after SIGTERM, $(wc -l < "$work/shutdown-sigkill.txt") after SIGKILL; of the SIGTERM ones missing after SIGKILL: $missing"
  comm -23 "$work/shutdown-sigterm.txt" "$work/shutdown-sigkill.txt" | head -5 | sed 's/^/  missing: /' | tee -a "$out/summary.txt"
fi
say "tail of engine.log after SIGKILL:"; tail -6 "$work/engine-sigkill.log" | cut -c1-160 | sed 's/^/  /' | tee -a "$out/summary.txt"
say "end $(date -u +%H:%M:%S)"
tar czf "$out/i18b.tgz" -C "$work" --exclude='state-*' --exclude=profiles .
exit 0
