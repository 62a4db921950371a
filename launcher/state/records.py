"""The shape of each state record, checked when it is read: the state dir may hold a file from an
older launcher, a hand edit or a disk fault, and a wrong type must become one clear error naming
the file (or a skipped history line), never a KeyError or TypeError deep in a command."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from launcher.atomicfile import read_bytes_nofollow
from launcher.errors import BadInput

Check = Callable[[Any], bool]


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _opt(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _dict(value: Any) -> bool:
    return isinstance(value, dict)


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_int(v) for v in value)


def _gate_results(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(g, dict) and all(isinstance(g.get(k), str) for k in ("name", "verdict", "summary"))
        for g in value
    )


# One check per field of gates.context.Expectations (a test keeps the two in step).
EXPECTATION_CHECKS: Mapping[str, Check] = {
    "served_model_names": _str_list,
    "capture_sizes": _opt(_int_list),
    "configured_sizes": _opt(_int_list),
    "enforce_eager": lambda v: isinstance(v, bool),
    "cudagraph_mode": _opt(_is_str),
    "max_num_seqs": _opt(_is_int),
    "decode_query_len": _is_int,
    "max_model_len": _opt(_is_int),
    "model_runner": _is_str,
}


def _expectations(value: Any) -> bool:
    if not isinstance(value, dict) or not _str_list(value.get("served_model_names")):
        return False
    return set(value) <= set(EXPECTATION_CHECKS) and all(
        check(value[k]) for k, check in EXPECTATION_CHECKS.items() if k in value
    )


def _watch(value: Any) -> bool:
    """The serving watch's verdict in status.json (launcher/watch/verdict.py `Judgement.to_json`)."""
    return isinstance(value, dict) and _is_str(value.get("verdict")) and _opt(_is_str)(value.get("check"))


# Required keys and their checks; optional keys, when present, are checked too.
LAST_GOOD_SEEN: Mapping[str, Check] = {"argv": _str_list, "env": _str_map, "fingerprint": _is_str}
LAST_GOOD: Mapping[str, Check] = {
    "profile": _is_str,
    "fingerprint": _is_str,
    "argv": _str_list,
    "env": _str_map,
    "host": _is_str,
    "port": _is_int,
    "gate_order": _str_list,
    "expect": _expectations,
}
LAST_GOOD_OPTIONAL: Mapping[str, Check] = {
    "secret_env": _str_map,
    "gate_tables": _dict,
    "supervisor": _dict,
    "profile_data": _dict,
}
STATUS: Mapping[str, Check] = {"phase": _is_str}
STATUS_OPTIONAL: Mapping[str, Check] = {
    "profile": _is_str,
    "launcher_pid": _is_int,
    "engine_pid": _opt(_is_int),
    "gates": _gate_results,
    "reload_seq": _is_int,
    "serving_profile": _opt(_is_str),
    "serving_fingerprint": _opt(_is_str),
    "engine_started_at": _opt(_is_str),
    "phase_since": _opt(_is_str),
    "rollback_reason": _opt(_is_str),
    "detail": _opt(_is_str),
    "watch": _opt(_watch),
    "frontdoor_url": _opt(_is_str),
    "trial": _opt(lambda value: isinstance(value, dict)),
    "reload_refused": _is_int,
    "last_reload_refusal": _opt(lambda value: isinstance(value, dict)),
    "confirmed_at": _opt(_is_str),  # absent in an older launcher's record: then it is not judged stale
    "confirm_every_s": _opt(_positive_number),
}
HISTORY: Mapping[str, Check] = {"ts": _is_str, "event": _is_str}
HISTORY_OPTIONAL: Mapping[str, Check] = {"profile": _is_str}


def shape_problem(
    data: Any, required: Mapping[str, Check], optional: Mapping[str, Check] | None = None
) -> str | None:
    """The first way `data` differs from the shape, in words, or None."""
    if not isinstance(data, dict):
        return f"expected a JSON object, found {type(data).__name__}"
    for key, check in required.items():
        if key not in data:
            return f"missing {key!r}"
        if not check(data[key]):
            return f"{key!r} has the wrong type ({data[key]!r:.60})"
    for key, check in (optional or {}).items():
        if key in data and not check(data[key]):
            return f"{key!r} has the wrong type ({data[key]!r:.60})"
    return None


def read_record(
    path: Path, required: Mapping[str, Check], optional: Mapping[str, Check] | None = None
) -> dict[str, Any] | None:
    """A JSON state file checked against its shape; None when it does not exist, BadInput naming
    the file when it cannot be read, is not UTF-8 JSON, or has the wrong shape."""
    try:
        raw = read_bytes_nofollow(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise BadInput(
            f"cannot read state file {path}: {err.strerror or err}; nothing was changed",
            hint="a state file is never read through a symbolic link: move it aside and look at it",
        ) from err
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise _corrupt(path, f"not UTF-8 (byte {err.start})") from err
    except json.JSONDecodeError as err:
        raise _corrupt(path, f"line {err.lineno}: {err.msg}") from err
    except RecursionError as err:
        raise _corrupt(path, "nested too deeply") from err
    problem = shape_problem(data, required, optional)
    if problem is not None:
        raise _corrupt(path, problem)
    return dict(data)


def _corrupt(path: Path, why: str) -> BadInput:
    return BadInput(
        f"state file {path} is corrupt ({why}); nothing was changed",
        hint="move it aside (the launcher writes a fresh one) or restore it from a backup",
    )
