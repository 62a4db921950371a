#!/usr/bin/env bash
# promtool into DIR (CI gives the venv's bin, where tests/unit/test_fleet_prometheus.py looks beside
# PATH), to check and unit-test the shipped alert rules (fleet/prometheus/). Taken out of Debian's
# `prometheus` package with apt-get download and dpkg-deb, never installed: installing it would set
# up and start a Prometheus server on the CI host. Prints promtool's version; when it cannot be had
# (no apt-get, no package), prints why and exits 1: the caller skips the promtool step, and the
# suite's pure-Python checks of the rules still run.
set -uo pipefail
dir="$1"
if [ -x "$dir/promtool" ]; then
    "$dir/promtool" --version 2>&1 | head -1
    exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "promtool: not installed: this host has no apt-get/dpkg-deb (Debian's prometheus package carries it)"
    exit 1
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
chmod 0755 "$scratch"  # apt's sandbox user writes the download there
fetch() { (cd "$scratch" && apt-get download -q prometheus >"$scratch/apt.log" 2>&1); }
if ! fetch; then  # an old or missing package list: read it once, then try again
    apt-get update -q >"$scratch/update.log" 2>&1 || true
    if ! fetch; then
        echo "promtool: not installed: apt-get download prometheus failed: $(grep -E '^(E|W):' "$scratch/apt.log" | tail -1)"
        exit 1
    fi
fi
if ! dpkg-deb --fsys-tarfile "$scratch"/prometheus_*.deb | tar -x -C "$scratch" ./usr/bin/promtool; then
    echo "promtool: not installed: Debian's prometheus package holds no ./usr/bin/promtool"
    exit 1
fi
install -m 0755 "$scratch/usr/bin/promtool" "$dir/promtool"
"$dir/promtool" --version 2>&1 | head -1
