"""Is every requirement of GuideLLM met on this sys.path, and from where? (device.sh guidellm-install)

    PYTHONPATH=/tmp/guidellm-site:/tmp/site python3 guidellm_deps.py [DIST]

Walks DIST's (default guidellm) Requires-Dist recursively, with the extras each dependant asks for
(httpx[http2]), markers evaluated here,
and prints one line per distribution: its version, the sys.path entry it is imported from (first
wins, as in the import system), and any requirement it fails. GuideLLM's wheels are installed with
--no-deps beside the image's and vLLM's packages, so pip never checked this: a gap shows here, before
a benchmark fails half-way. Exit 0 when all are met, 1 otherwise. Standard library, plus `packaging`
(the image has it) to read version specifiers.
"""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def located(dist: metadata.Distribution) -> str:
    """The sys.path entry the distribution's metadata lives in."""
    path = str(getattr(dist, "_path", ""))
    return next((p for p in sys.path if p and path.startswith(p.rstrip("/") + "/")), path)


def wanted(req: Requirement, extras: frozenset[str]) -> bool:
    """Whether a Requires-Dist line applies here, for the extras the dependant asked for."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": extra}) for extra in ("", *sorted(extras)))


def walk(root: str) -> tuple[list[str], int]:
    lines: list[str] = []
    problems = 0
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(root)]
    while todo:
        req = todo.pop()
        name, extras = canonicalize_name(req.name), frozenset(req.extras)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            lines.append(f"MISSING {req}  (needed, not importable)")
            problems += 1
            continue
        if req.specifier and not req.specifier.contains(dist.version, prereleases=True):
            lines.append(f"CONFLICT {name} {dist.version} from {located(dist)}: needs {req}")
            problems += 1
        if (name, extras) in seen:
            continue
        if not any(seen_name == name for seen_name, _ in seen):
            lines.append(f"ok {name} {dist.version} from {located(dist)}")
        seen.add((name, extras))
        todo += [r for r in map(Requirement, dist.requires or []) if wanted(r, extras)]
    return sorted(lines), problems


def main(argv: list[str]) -> int:
    lines, problems = walk(argv[1] if len(argv) > 1 else "guidellm")
    print("\n".join(lines))
    print(f"{len(lines)} distributions, {problems} unmet")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
