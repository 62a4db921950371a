#!/usr/bin/env bash
# `launch check` and `launch status` exit codes against the real vLLM on the GPU machine, after
# `device.sh install` (issue 19). Run from the repository root; evidence goes to $OUT/fleet.tgz and
# one line per finding to $OUT/fleet-summary.txt. About 3 minutes (the tiny model loads in ~1.5).
#
#   check-fleet.sh [RUNS]   RUNS timed `launch check` per variant (default 5)
#     tiny-serve promoted → status exit 0; check --gates health, the default set, --full: exit and
#     wall time of each run (tool_call fails honestly on random weights: exit 1, its time counts);
#     status of an unknown profile → 4; SIGTERM of the launcher (by pid) → status 3, check exit 1.
#
# Rehearse off the GPU: VLLM_GATE_REHEARSAL=1 (see check-release.sh), with /root/tiny in place.
set -u
runs=${1:-5}
[[ $runs =~ ^[1-9][0-9]?$ ]] || { echo "RUNS must be 1-99, not $runs" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/tmp/check-fleet; state=/tmp/check-fleet-state; w=$work/evidence
rm -rf "$work" "$state"; mkdir -p "$out" "$w"
cp -r scripts/real-vllm/profiles "$work/profiles"  # the checkout stays as it was
L=(python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$state")
p=tiny-serve

say() { echo "[fleet] $*" | tee -a "$out/fleet-summary.txt"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
phase_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('phase'))" \
             "$state/profiles/$p/status.json" 2>/dev/null; }
until_phase() {  # SECONDS PHASE...
  local end=$((SECONDS + $1)); shift
  until [[ " $* " == *" $(phase_of) "* ]]; do [ $SECONDS -ge $end ] && return 1; sleep 0.5; done
}
timed_checks() {  # NAME ARGS...: RUNS runs of `launch check`, exit codes and wall times
  local name=$1 i t0 rc times="" codes=""; shift
  for i in $(seq "$runs"); do
    t0=$(now)
    "${L[@]}" check --profile $p --json "$@" > "$w/check-$name-$i.json" 2>&1; rc=$?
    times="$times $(since "$t0")"; codes="$codes $rc"
  done
  local median; median=$(python3 -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))" $times)
  say "launch check $name: exit codes$codes; seconds$times (median $median)"
  python3 - "$w/check-$name-1.json" <<'EOF' | tee -a "$out/fleet-summary.txt"
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"  no report: {err}")
for gate in report["gates"]:
    print(f"  {gate['name']}: {gate['verdict']} ({gate['duration_s']:.2f} s): {gate['summary'][:300]}")
EOF
}
status_code() {  # NAME: `launch status --profile NAME --json` exit code, its JSON kept
  "${L[@]}" status --profile "$1" --json > "$w/status-$1-$2.json" 2>&1; echo $?
}

"${L[@]}" --profile $p > "$w/launch.txt" 2>&1 &
launcher=$!
t0=$(now)
until_phase 480 serving failed stopped || say "no verdict in 480 s"
say "launch --profile $p (pid $launcher): phase $(phase_of) after $(since "$t0") s"
if [ "$(phase_of)" = serving ]; then
  say "launch status --profile $p while serving: exit $(status_code $p serving) (0 = serving)"
  timed_checks health --gates health
  timed_checks default
  timed_checks full --full
else
  say "not serving: no check timings"
fi
say "launch status --profile no-such-profile: exit $(status_code no-such-profile unknown) (4 = unknown)"
kill -TERM $launcher; wait $launcher; rc=$?
say "SIGTERM launcher pid $launcher: exit $rc; phase $(phase_of)"
say "launch status --profile $p after the stop: exit $(status_code $p stopped) (3 = not serving)"
t0=$(now)
"${L[@]}" check --profile $p --gates health > "$w/check-stopped.txt" 2>&1; rc=$?
say "launch check --gates health after the stop: exit $rc after $(since "$t0") s (1 = failed)"
cp "$state/history.jsonl" "$w/" 2>/dev/null
tar -czf "$out/fleet.tgz" -C "$work" evidence
