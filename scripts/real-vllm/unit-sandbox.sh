#!/usr/bin/env bash
# Does vLLM still start and pass the gates inside the sandbox of systemd/vllm-gate@.service?
# `launch try --profile tiny` runs under the unit's hardening, after `device.sh install`; the
# verdicts and vLLM's log go to $OUT/unit-sandbox.txt and $OUT/unit-sandbox.tgz. About 2 minutes.
#
# With systemd as PID 1 the unit's own directives are applied by `systemd-run` (read from
# launcher/host/unit.py, so this checks what ships), with the drop-in's IP allow list and its
# environment for the tiny profile (launcher/host/unit_network.py); User= is not applied (the
# device's checkout and site dirs are root's). Without systemd (a container), the file-system parts
# are rebuilt in a private mount namespace and the rest is named as not checked:
#   NoNewPrivileges       setpriv --no-new-privs
#   CapabilityBoundingSet= setpriv --bounding-set -all --inh-caps -all (root keeps no capability)
#   PrivateTmp            a fresh tmpfs on /tmp (the device's /tmp/site, /tmp/gate-site bound back read-only)
#   PrivateMounts         the private mount namespace itself
#   ProtectSystem=full    /usr, /boot, /etc read-only
#   ProtectKernelTunables /proc/sys and /sys read-only (ProtectControlGroups: /sys/fs/cgroup with it)
#   ProtectHostname       a UTS namespace;   UMask=0027   umask 0027
#   the drop-in's env     VLLM_HOST_IP, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, HF_HUB_OFFLINE as written
#   not emulated          ProtectKernelModules, RestrictSUIDSGID, RestrictRealtime, RestrictNamespaces,
#                         LockPersonality, SystemCallArchitectures, SystemCallFilter,
#                         RestrictAddressFamilies (seccomp), IPAddressDeny/Allow (a cgroup BPF filter)
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

# The drop-in's network lines for the tiny profile: IPAddressDeny/Allow, and the environment that goes
# with them (none where install-unit would leave them commented).
mapfile -t net_lines < <(python3 - "$work/profiles" <<'EOF'
import sys
from pathlib import Path
from launcher.host.unit_network import ip_filter_lines
from launcher.profile.plan import build_plan
plan = build_plan(Path(sys.argv[1]), "tiny")
for line in ip_filter_lines(plan.host, plan.engine, plan.args, plan.env, []).splitlines():
    if line.startswith("Environment="):
        print(*(f"env:{word}" for word in line.removeprefix("Environment=").split()), sep="\n")
    elif not line.startswith("#"):
        print(line)
EOF
)
net_env=(); net_props=()
for line in "${net_lines[@]}"; do
  case $line in env:*) net_env+=("${line#env:}");; *) net_props+=("$line");; esac
done

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
                   "UMask", "CapabilityBoundingSet", "SystemCallFilter", "SystemCallErrorNumber",
                   "RestrictAddressFamilies", "PrivateMounts"}:
            print(line)
EOF
)
  props+=("${net_props[@]}")
  args=(); for p in "${props[@]}"; do args+=(-p "$p"); done
  for e in "${net_env[@]}"; do args+=("--setenv=$e"); done
  say "systemd-run with: ${props[*]} ${net_env[*]}"
  systemd-run --wait --collect --quiet --pipe "${args[@]}" -p "BindReadOnlyPaths=-/tmp/site -/tmp/gate-site" \
    --working-directory="$repo" --setenv=PYTHONPATH="$PYTHONPATH" --setenv=PYTHONUNBUFFERED=1 \
    --setenv=VLLM_USE_FLASHINFER_SAMPLER=0 --setenv=HF_HUB_OFFLINE=1 --setenv=VLLM_NO_USAGE_STATS=1 \
    timeout -k 30 480 "${try_argv[@]}" > "$out/unit-sandbox.json" 2> "$work/try.err"
  rc=$?
else
  say "no systemd as PID 1: file-system parts emulated in a mount namespace (see the script's header)"
  drop_caps=(--bounding-set -all --inh-caps -all)
  setpriv "${drop_caps[@]}" true 2>/dev/null || { drop_caps=(); say "capabilities kept: setpriv refused to drop them"; }
  [ ${#net_props[@]} -gt 0 ] && say "not emulated: ${net_props[*]}; applied: ${net_env[*]}"
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
  timeout -k 30 480 unshare --mount --uts -- env "${net_env[@]}" bash -c "$inner" sandbox \
    "${drop_caps[@]}" "${try_argv[@]}" > "$out/unit-sandbox.json" 2> "$work/try.err"
  rc=$?
  cat > "$work/probe.sh" <<'EOF'
touch /usr/.w 2>/dev/null && echo "/usr WRITABLE" || echo "/usr read-only"
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "/proc/sys WRITABLE" || echo "/proc/sys read-only"
grep -E 'NoNewPrivs|CapEff' /proc/self/status | tr -s '\t ' ' '
echo "env: VLLM_HOST_IP=${VLLM_HOST_IP:-} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-} GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-}"
echo "/tmp holds: $(ls /tmp | tr '\n' ' ')"
echo "hostname $(hostname), umask $(umask)"
EOF
  unshare --mount --uts -- env "${net_env[@]}" bash -c "$inner" sandbox "${drop_caps[@]}" bash "$work/probe.sh" \
    2>&1 | sed 's/^/  inside: /' \
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
