#!/usr/bin/env bash
# Download GuideLLM 0.8.1 and the wheels it needs beyond the GPU machine's image and vLLM 0.26.0's
# deps (the pinned, hashed list guidellm-wheels.txt beside this file), for CPython 3.12 manylinux
# x86_64, then pack them, whole, into parts: one device call carries one part, and a call carries
# 64 MiB in all, the working tree included (4.1 MB on 2026-12-01). Parts of 57 MiB by default
# leave 7 MB for the tree. device.sh guidellm-stash / guidellm-install use them.
#
#   fetch-guidellm.sh DEST [PART_MIB]   DEST: a folder of the repo that git ignores
#                                       (.vllm-wheels/guidellm); PART_MIB: 57, at most 60
#
# Writes DEST/g0, DEST/g1, ... (wheels) and DEST/guidellm.sha256 (`sha256sum -c` format, from DEST).
# pip checks every download against the list's sha256; the device checks them again on install.
set -eu
[ $# -ge 1 ] && [ -n "$1" ] || { echo "usage: fetch-guidellm.sh DEST [PART_MIB]" >&2; exit 2; }
dest=${1%/}
here=$(cd "$(dirname "$0")" && pwd)
# DEST is replaced whole: only a new folder or an earlier fetch's (g0, g1, ..., guidellm.sha256).
if [ -e "$dest" ] && [ -n "$(find "$dest" -mindepth 1 -maxdepth 1 ! -name 'g[0-9]*' ! -name guidellm.sha256 | head -1)" ]; then
  echo "$dest holds other files than an earlier fetch-guidellm.sh: give an empty or new folder" >&2; exit 2
fi
part_mib=${2:-57}
[[ $part_mib =~ ^[0-9]+$ ]] && [ "$part_mib" -ge 45 ] && [ "$part_mib" -le 60 ] || {
  echo "PART_MIB must be 45-60 (pyarrow alone is 41 MiB; a call carries 64 MiB with the tree)" >&2; exit 2; }
part_max=$((part_mib * 1024 * 1024))
plat="--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312"
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64 any; do
  plat="$plat --platform $p"; done
# Built beside DEST, then swapped in: a failed download leaves DEST as it was.
mkdir -p "$(dirname "$dest")"
work=$(mktemp -d "$dest.partial.XXXXXX"); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/all"
# --no-deps: the list is the whole closure already (what the image and vLLM's deps hold is left out
# on purpose); --require-hashes: every file must be the one recorded.
python3 -m pip download -q --no-deps --require-hashes $plat -d "$work/all" -r "$here/guidellm-wheels.txt"
# First fit, largest first: pyarrow (43 MB), pandas (12 MB) and uvloop fill g0, the rest goes to g1.
python3 - "$work" "$part_max" <<'PY'
import sys
from pathlib import Path
dest, part_max = Path(sys.argv[1]), int(sys.argv[2])
parts: list[list[Path]] = []
sizes: list[int] = []
for wheel in sorted((dest / "all").glob("*.whl"), key=lambda p: -p.stat().st_size):
    size = wheel.stat().st_size
    i = next((k for k, used in enumerate(sizes) if used + size <= part_max), len(parts))
    if i == len(parts):
        parts.append([]); sizes.append(0)
    parts[i].append(wheel); sizes[i] += size
for i, wheels in enumerate(parts):
    (dest / f"g{i}").mkdir()
    for wheel in wheels:
        wheel.rename(dest / f"g{i}" / wheel.name)
(dest / "all").rmdir()
for i, used in enumerate(sizes):
    print(f"g{i}: {len(parts[i])} wheels, {used:,} B ({used / 2**20:.1f} MiB)")
print(f"total: {sum(sizes):,} B ({sum(sizes) / 1e6:.1f} MB) in {len(parts)} parts")
PY
(cd "$work" && sha256sum g*/*.whl > guidellm.sha256)
rm -rf "$dest" && mv "$work" "$dest" && trap - EXIT
echo "sha256 of every wheel: $dest/guidellm.sha256"
