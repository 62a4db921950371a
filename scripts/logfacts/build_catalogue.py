"""Build launcher/data/log_catalogue.json: which vLLM releases print each phrasing, and where.

    python3 scripts/logfacts/build_catalogue.py SRC_DIR [--out launcher/data/log_catalogue.json]

SRC_DIR holds one folder per release (`0.6.0/vllm/...`, `0.33.0/vllm/...`): vLLM's Python source as
published (release sdists; /work/notes/get-src.sh fetches them, `git archive TAG vllm` from a clone
does the same). For every phrasing of scripts/logfacts/phrasings.py the builder records the releases
whose source contains it (as ranges over the releases present) and the file:line in the first and
the last of them. Phrasings that come from torch, Python, huggingface_hub, argparse or CUDA are not in
vLLM's source: they get `origin` and, when given, the vLLM call site that triggers them. Output is
sorted and stable, so a rebuild shows in a diff what a new release changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from phrasings import FACTS, FAILURES  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "launcher" / "data" / "log_catalogue.json"


def release_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


def load_release(root: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted((root / "vllm").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "/tests/" in rel:
            continue
        files[rel] = path.read_text(encoding="utf-8", errors="replace")
    return files


def find(files: dict[str, str], phrase: str) -> str | None:
    """`path:line` of the first source line holding `phrase` (files in sorted order)."""
    for rel, text in files.items():
        at = text.find(phrase)
        if at >= 0 and "\n" not in phrase:
            return f"{rel}:{text.count(chr(10), 0, at) + 1}"
    return None


def ranges(hits: list[str], releases: list[str]) -> list[str]:
    """['0.6.0-0.8.5', '0.10.0-0.33.0'] over the releases present, gaps splitting ranges."""
    out: list[str] = []
    start = prev = None
    for rel in releases:
        if rel in hits:
            start = start or rel
            prev = rel
        elif start:
            out.append(start if start == prev else f"{start}-{prev}")
            start = None
    if start:
        out.append(start if start == prev else f"{start}-{prev}")
    return out


def build(src: Path) -> dict[str, object]:
    releases = sorted((p.name for p in src.iterdir() if (p / "vllm").is_dir()), key=release_key)
    entries = [dict(e) for e in FAILURES + FACTS]
    found: list[dict[str, str]] = [{} for _ in entries]
    for rel in releases:
        files = load_release(src / rel)
        for i, entry in enumerate(entries):
            site = find(files, entry.get("site_phrase") or entry["phrase"])
            if site:
                found[i][rel] = site
        print(f"{rel}: {len(files)} files", file=sys.stderr)
    rows = []
    missing = []
    for entry, sites in zip(entries, found, strict=True):
        hits = [r for r in releases if r in sites]
        if not hits:
            missing.append(entry["phrase"])
        first, last = (hits[0], hits[-1]) if hits else (None, None)
        rows.append({
            **entry,
            "releases": ranges(hits, releases) if entry["origin"] == "vllm" else ["any"],
            "vllm_releases_seen": ranges(hits, releases),
            "first_release": first, "last_release": last,
            "site_first": sites.get(first) if first else None,
            "site_last": sites.get(last) if last else None,
        })
    return {
        "about": "Which vLLM releases print each phrasing the log parser reads; built by "
                 "scripts/logfacts/build_catalogue.py from vLLM's source per release.",
        "releases_scanned": releases,
        "not_found_in_vllm_source": missing,
        "rows": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    data = build(args.src)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"{len(data['rows'])} rows -> {args.out}; not in vLLM source: {data['not_found_in_vllm_source']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
