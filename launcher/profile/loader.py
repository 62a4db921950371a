"""Find, read and resolve profiles: the `extends` chain merged table by table, with provenance.

Merging rule: tables merge key by key down the chain; arrays and scalars are replaced. Every leaf
value remembers the file it came from, so `--explain` can say why a flag is there.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import BadInput, ProfileNotFound, ProfileSyntaxError
from launcher.profile import bounds

PROFILE_SUFFIX = ".toml"
NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")  # no separators, no "..", no newline


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """A profile with its chain merged: `data` is what renders, `provenance` maps dotted keys to files."""

    name: str
    chain: tuple[str, ...]
    files: tuple[Path, ...]
    data: dict[str, Any]
    provenance: dict[str, Path]

    def source_of(self, dotted_key: str) -> Path | None:
        """The file a value came from; for a table, the file of its first value."""
        exact = self.provenance.get(dotted_key)
        if exact is not None:
            return exact
        for key, path in self.provenance.items():
            if key.startswith(dotted_key + "."):
                return path
        return None


def available_profiles(profiles_dir: Path) -> list[str]:
    if not profiles_dir.is_dir():
        return []
    return sorted(p.stem for p in profiles_dir.glob(f"*{PROFILE_SUFFIX}") if p.is_file())


def check_name(name: str) -> str:
    """A profile name names files and a unit instance: checked before anything touches the disk."""
    if not NAME_RE.match(name):
        shown = repr(name) if len(name) <= 80 else repr(name[:80]) + f"… ({len(name)} characters)"
        raise BadInput(
            f"invalid profile name {shown}",
            hint="use 1-64 letters, digits, '-', '_' and '.', starting with a letter or digit",
        )
    return name


def profile_path(profiles_dir: Path, name: str) -> Path:
    """The file of profile `name`; a clear error listing what exists when there is none."""
    path = profiles_dir / f"{check_name(name)}{PROFILE_SUFFIX}"
    if not path.is_file():
        existing = available_profiles(profiles_dir)
        listing = ", ".join(existing) if existing else "none"
        raise ProfileNotFound(
            f"no profile {name!r} in {profiles_dir} (profiles there: {listing})",
            hint="pass --profiles-dir DIR or set VLLM_GATE_PROFILES",
        )
    return path


def link_outside(profiles_dir: Path, path: Path) -> Path | None:
    """Where a profile file really is, when it is a symbolic link that leaves the profiles dir (an
    operator's choice, kept in a config repo: followed, and named wherever the profile is shown;
    docs/host-safety.md "Symbolic links"); None for a plain file or a link that stays inside."""
    if not path.is_symlink():
        return None
    target = Path(os.path.realpath(path))
    home = Path(os.path.realpath(profiles_dir))
    return None if target.is_relative_to(home) else target


def link_note(profiles_dir: Path, path: Path) -> str | None:
    target = link_outside(profiles_dir, path)
    if target is None:
        return None
    return f"{path} is a link to {target}, outside {profiles_dir}: that file is what is read and written"


def read_toml(path: Path) -> dict[str, Any]:
    """Parse one TOML file; syntax errors become `file:line:col: message`."""
    try:
        if path.stat().st_size > bounds.MAX_PROFILE_BYTES:
            raise BadInput(f"{path}: larger than a profile can be ({bounds.MAX_PROFILE_BYTES:,} bytes)")
        raw = path.read_bytes()
    except OSError as err:
        raise BadInput(f"cannot read {path}: {err.strerror or err}") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"{path} is not UTF-8 text (byte {err.start})") from err
    if bounds.nesting_depth(text) > bounds.MAX_DEPTH:  # tomllib recurses once per nesting level
        raise ProfileSyntaxError(
            f"{path}: TOML nested too deeply to be a profile (over {bounds.MAX_DEPTH} levels)"
        )
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProfileSyntaxError(_syntax_message(path, err)) from err
    except RecursionError as err:  # dotted keys (`a.b.c…`) nest too, without brackets
        raise ProfileSyntaxError(f"{path}: TOML nested too deeply to be a profile") from err
    problem = bounds.value_problem(document)
    if problem is not None:
        raise BadInput(f"{path}: {problem}", hint="no vLLM setting is that large or that deep")
    return document


def _syntax_message(path: Path, err: tomllib.TOMLDecodeError) -> str:
    line = getattr(err, "lineno", None)
    col = getattr(err, "colno", None)
    message = getattr(err, "msg", None) or str(err)
    if line is None:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(err))
        if found:
            line, col = int(found.group(1)), int(found.group(2))
            message = str(err)[: found.start()].strip()
    where = f"{path}:{line}:{col}" if line is not None else str(path)
    return f"{where}: TOML syntax error: {message}"


def resolve(profiles_dir: Path, name: str, *, top_file: Path | None = None) -> ResolvedProfile:
    """Resolve `name` and its `extends` chain. `top_file` replaces the first file (used to render `.bak`s)."""
    chain: list[str] = []
    files: list[Path] = []
    documents: list[dict[str, Any]] = []
    current: str | None = name
    while current is not None:
        if current in chain:
            cycle = " → ".join([*chain, current])
            raise BadInput(f"profile 'extends' cycle: {cycle}", hint="remove one of the 'extends' keys")
        path = top_file if (top_file is not None and not chain) else profile_path(profiles_dir, current)
        document = _normalize_args(read_toml(path), path)
        parent = document.get("extends")
        if parent is not None and not isinstance(parent, str):
            raise BadInput(f"{path}: 'extends' must be a profile name (a string), got {parent!r}")
        chain.append(current)
        files.append(path)
        documents.append(document)
        current = parent
    merged: dict[str, Any] = {}
    provenance: dict[str, Path] = {}
    for depth, (path, document) in enumerate(zip(reversed(files), reversed(documents), strict=True)):
        is_top = depth == len(files) - 1
        # `abstract` describes one file (base profiles), so it is never inherited.
        body = {k: v for k, v in document.items() if k != "extends" and (is_top or k != "abstract")}
        _merge(merged, body, path, provenance, prefix="")
    return ResolvedProfile(
        name=name, chain=tuple(chain), files=tuple(files), data=merged, provenance=provenance
    )


def _normalize_args(document: dict[str, Any], path: Path) -> dict[str, Any]:
    """`[args]` keys are vLLM flags: `max-num-seqs` and `max_num_seqs` are one key, so a child's
    spelling overrides its parent's whatever the dashes."""
    args = document.get("args")
    if not isinstance(args, dict):
        return document
    normalized: dict[str, Any] = {}
    for key, value in args.items():
        snake = key.replace("-", "_")
        if snake in normalized:
            raise BadInput(f"{path}: [args] sets {snake} twice (as {key!r} and another spelling)")
        normalized[snake] = value
    return {**document, "args": normalized}


def _merge(
    into: dict[str, Any], overlay: dict[str, Any], source: Path, provenance: dict[str, Path], prefix: str
) -> None:
    for key, value in overlay.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, source, provenance, prefix=dotted + ".")
            continue
        if isinstance(value, dict):
            into[key] = {}
            _drop_provenance(provenance, dotted)
            _merge(into[key], value, source, provenance, prefix=dotted + ".")
            continue
        _drop_provenance(provenance, dotted)
        into[key] = value
        provenance[dotted] = source


def _drop_provenance(provenance: dict[str, Path], dotted: str) -> None:
    for key in [k for k in provenance if k == dotted or k.startswith(dotted + ".")]:
        del provenance[key]
