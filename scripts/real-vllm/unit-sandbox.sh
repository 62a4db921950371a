#!/usr/bin/env bash
# Does vLLM still start and pass the gates inside the sandbox of systemd/vllm-gate@.service?
# `launch try --profile tiny` runs under the unit's hardening, after `device.sh install`; the
# verdicts and vLLM's log go to $OUT/unit-sandbox.txt and $OUT/unit-sandbox.tgz. About 2 minutes.
#
# With systemd as PID 1 the unit's own directives are applied by `systemd-run` (read from
# launcher/host/unit.py, so this checks what ships). Without it (a container), the file-system
# parts are rebuilt in a private mount namespace and the rest is named as not checked:
#   NoNewPrivileges       setpriv --no-new-privs
#   PrivateTmp            a fresh tmpfs on /tmp (the device's /tmp/site, /tmp/gate-site bound back read-only)
#   ProtectSystem=full    /usr, /boot, /etc read-only
#   ProtectKernelTunables /proc/sys and /sys read-only (ProtectControlGroups: /sys/fs/cgroup with it)
#   ProtectHostname       a UTS namespace;   UMask=0027   umask 0027
#   not emulated          ProtectKernelModules, RestrictSUIDSGID, RestrictRealtime, RestrictNamespaces,
#                         LockPersonality, SystemCallArchitectures (seccomp and capability filters)
#
# Rehearse off the GPU: VLLM_GATE_REHEARSAL=1 bash scripts/real-vllm/unit-sandbox.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
repo=$PWD
export PYTHONPATH=$repo:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
[ -n "${VLLM_GATE_REHEARSAL:-}" ] && export PYTHONPATH=$repo/scripts/real-vllm/rehearsal:$PYTHONPATH
out=${OUT:-/tmp/check-out}; work=/var/lib/vllm-gate-sandbox  # not under /tmp: PrivateTmp hides it
mkdir -p "$out"; rm -rf "$work"; mkdir -p "$work"
cp -r scripts/real-vllm/profiles "$work/profiles"
say() { echo "[unit-sandbox] $*" | tee -a "$out/unit-sandbox.txt"; }
try_argv=(python3 -m launcher.cli --profiles-dir "$work/profiles" --state-dir "$work/state" try --profile tiny --json)
t0=$SECONDS

if [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ] && command -v systemd-run >/dev/null; then
  mapfile -t props < <(python3 - <<'EOF'
from launcher.host.unit import SHIPPED_LAUNCH, render_unit
section = ""
for line in render_unit(SHIPPED_LAUNCH).splitlines():
    if line.startswith("["):
        section = line
    elif section == "[Service]" and "=" in line and not line.startswith("#"):
        key = line.split("=", 1)[0]
        if key in {"NoNewPrivileges", "PrivateTmp", "ProtectSystem", "ProtectKernelTunables",
                   "ProtectKernelModules", "ProtectControlGroups", "ProtectHostname", "RestrictSUIDSGID",
                   "RestrictRealtime", "RestrictNamespaces", "LockPersonality", "SystemCallArchitectures",
                   "UMask"}:
            print(line)
EOF
)
  args=(); for p in "${props[@]}"; do args+=(-p "$p"); done
  say "systemd-run with: ${props[*]}"
  systemd-run --wait --collect --quiet --pipe "${args[@]}" -p "BindReadOnlyPaths=-/tmp/site -/tmp/gate-site" \
    --working-directory="$repo" --setenv=PYTHONPATH="$PYTHONPATH" --setenv=PYTHONUNBUFFERED=1 \
    --setenv=VLLM_USE_FLASHINFER_SAMPLER=0 --setenv=HF_HUB_OFFLINE=1 --setenv=VLLM_NO_USAGE_STATS=1 \
    timeout -k 30 480 "${try_argv[@]}" > "$out/unit-sandbox.json" 2> "$work/try.err"
  rc=$?
else
  say "no systemd as PID 1: file-system parts emulated in a mount namespace (see the script's header)"
  # shellcheck disable=SC2016
  inner='set -e
    mount --make-rprivate /
    mkdir -p /run/unit-sandbox-tmp && mount --bind /tmp /run/unit-sandbox-tmp
    mount -t tmpfs -o mode=1777 tmpfs /tmp
    for d in site gate-site; do
      [ -d /run/unit-sandbox-tmp/$d ] && mkdir -p /tmp/$d && mount --bind -o ro /run/unit-sandbox-tmp/$d /tmp/$d
    done
    for d in /usr /boot /etc /proc/sys /sys /sys/fs/cgroup; do
      [ -d $d ] && mount --rbind $d $d && mount -o remount,bind,ro $d
    done
    hostname unit-sandbox
    umask 0027
    exec setpriv --no-new-privs "$@"'
  timeout -k 30 480 unshare --mount --uts -- bash -c "$inner" sandbox "${try_argv[@]}" \
    > "$out/unit-sandbox.json" 2> "$work/try.err"
  rc=$?
  cat > "$work/probe.sh" <<'EOF'
touch /usr/.w 2>/dev/null && echo "/usr WRITABLE" || echo "/usr read-only"
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "/proc/sys WRITABLE" || echo "/proc/sys read-only"
grep NoNewPrivs /proc/self/status | tr -s '\t ' ' '
echo "/tmp holds: $(ls /tmp | tr '\n' ' ')"
echo "hostname $(hostname), umask $(umask)"
EOF
  unshare --mount --uts -- bash -c "$inner" sandbox bash "$work/probe.sh" 2>&1 | sed 's/^/  inside: /' \
    | tee -a "$out/unit-sandbox.txt"
fi

say "launch try tiny in the sandbox: exit $rc after $((SECONDS - t0)) s"
python3 - "$out/unit-sandbox.json" <<'EOF' | tee -a "$out/unit-sandbox.txt"
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"  no report: {err}")
for gate in report["gates"]:
    print(f"  {gate['name']}: {gate['verdict']} ({gate['duration_s']:.1f} s): {gate['summary'][:300]}")
EOF
tail -5 "$work/try.err" | sed 's/^/  stderr: /' | tee -a "$out/unit-sandbox.txt"
cp "$work/state/profiles/tiny/logs/try.log" "$work/try.log" 2>/dev/null
tar -czf "$out/unit-sandbox.tgz" -C "$work" try.err try.log state/history.jsonl 2>/dev/null
exit "$rc"
