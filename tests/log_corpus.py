"""The log corpus and its score: real vLLM logs with the facts read from them by hand.

Three kinds of fixture, each a log and the facts a person read in it (never what the parser says):
- `tests/data/logs/public/NNN-name.log` + `NNN-name.json`: excerpts users posted in public GitHub
  issues (the sidecar names the link, the release and why), vLLM 0.2.7 … 0.2x;
- `tests/data/real-vllm-0.26/facts/*.json`: starts recorded on the H200 with vLLM 0.26.0;
- `tests/data/logs/NAME.log` + `NAME.expected.json`: excerpts shaped like real logs (README there),
  their release in `tests/data/logs/releases.json`.

Each expected key is one field; a sidecar's `inferred` keys are fields too (the fact must be
recorded as inferred, from a line holding the given text). The score is fields right / fields.

    .venv/bin/python -m tests.log_corpus          # the per-release table (docs/logs.md) and every miss
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.logfacts import parse_file

DATA = Path(__file__).resolve().parent / "data"
PUBLIC = DATA / "logs" / "public"
SHAPED = DATA / "logs"
RECORDED = DATA / "real-vllm-0.26" / "facts"


@dataclass(frozen=True, slots=True)
class Fixture:
    name: str
    kind: str  # public / recorded / shaped
    log: Path
    release: str
    facts: dict[str, Any]
    inferred: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Field:
    fixture: str
    key: str
    want: Any
    got: Any

    @property
    def right(self) -> bool:
        return bool(self.want == self.got)


def fixtures() -> list[Fixture]:
    out = [_sidecar(p, "public", p.with_suffix(".log")) for p in sorted(PUBLIC.glob("*.json"))]
    out += [
        _sidecar(p, "recorded", (p.parent / json.loads(p.read_text())["log"]).resolve())
        for p in sorted(RECORDED.glob("*.json"))
    ]
    releases = json.loads((SHAPED / "releases.json").read_text())["releases"]
    for p in sorted(SHAPED.glob("*.expected.json")):
        name = p.name[: -len(".expected.json")]
        facts = json.loads(p.read_text())
        out.append(Fixture(name, "shaped", SHAPED / f"{name}.log", releases[name], facts))
    return out


def _sidecar(path: Path, kind: str, log: Path) -> Fixture:
    data = json.loads(path.read_text())
    return Fixture(path.stem, kind, log, data["release"], data["facts"], data.get("inferred", {}))


def judge(fixture: Fixture) -> list[Field]:
    """Every expected field of one fixture, as `launch parse-log --json` reads the log."""
    facts, _ = parse_file(fixture.log)
    got = facts.to_json()
    fields = [Field(fixture.name, k, want, got.get(k, "<no such key>")) for k, want in fixture.facts.items()]
    for key, text in fixture.inferred.items():
        ref = (got.get("inferred") or {}).get(key)
        line = ref.get("line") if isinstance(ref, dict) else None
        fields.append(Field(fixture.name, f"inferred.{key}", text, text if line and text in line else line))
    return fields


def family(release: str) -> str:
    """`0.10.x (CPU build)` -> `0.10`; `fork of 0.2x` -> `0.2x`; `0.6-0.8 (V0)` -> `0.6`."""
    m = re.search(r"0\.(\d+x|\d+)", release)
    return f"0.{m.group(1)}" if m else release


def _family_key(name: str) -> tuple[int, str]:
    """By minor release: 0.2 (0.2.7) < 0.5 < … < 0.14 < 0.1x (some 0.1y) < 0.16 < … < 0.2x < 0.26."""
    m = re.match(r"0\.(\d+)(x?)", name)
    if m is None:
        return (99999, name)
    minor = int(m.group(1))
    return ((minor * 10 + 5) * 10 if m.group(2) else minor * 10, name)


def table(judged: dict[str, tuple[Fixture, list[Field]]]) -> str:
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for fixture, fields in judged.values():
        row = rows[family(fixture.release)]
        row[0] += 1
        row[1] += len(fields)
        row[2] += sum(f.right for f in fields)
    lines = ["| release | logs | fields | right | share |", "|---|---:|---:|---:|---:|"]
    for name in sorted(rows, key=_family_key):
        logs, total, right = rows[name]
        lines.append(f"| {name} | {logs} | {total} | {right} | {right / total:.1%} |")
    logs = sum(r[0] for r in rows.values())
    total = sum(r[1] for r in rows.values())
    right = sum(r[2] for r in rows.values())
    lines.append(f"| **all** | {logs} | {total} | {right} | {right / total:.1%} |")
    return "\n".join(lines)


def judge_all() -> dict[str, tuple[Fixture, list[Field]]]:
    return {fixture.name: (fixture, judge(fixture)) for fixture in fixtures()}


def main() -> int:
    judged = judge_all()
    for kind in ("public", "recorded", "shaped"):
        part = {n: v for n, v in judged.items() if v[0].kind == kind}
        print(f"\n{kind}:\n{table(part)}")
    print(f"\nall:\n{table(judged)}\n")
    for _, fields in judged.values():
        for f in fields:
            if not f.right:
                print(f"MISS {f.fixture} {f.key}: want {f.want!r} got {f.got!r}"[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
