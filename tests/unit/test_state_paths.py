"""Every state file's path comes from `StateStore`: its name is spelled in launcher/state/ and nowhere
else in launcher/, so the layout (docs/architecture.md "State dir") changes in one place."""

from __future__ import annotations

import ast
from pathlib import Path

from launcher.state.store import StateStore

LAUNCHER = Path(__file__).resolve().parents[2] / "launcher"
# Whole names: a string that is exactly one of these is a state path spelled by hand.
FILE_NAMES = frozenset({
    "history.jsonl", "status.json", "last_good.json", "last_facts.json", "launcher.lock", "launcher.json",
    "restart_guard.json", "journal.json", "probe.lock", "restored-launcher.log", "engine.log", "try.log",
    "bug-reports", "change.lock", "caddy.json", "upstream", "admin.sock", "hold.sock", "frontdoor.lock",
    "pruned.jsonl",
})  # fmt: skip
# Directory names are common words: only a path join (`x / "profiles"`) counts.
DIR_NAMES = frozenset({"profiles", "locks", "reloads", "logs", "probe", "frontdoor"})
# Not the state dir: a probe arm's log lives in the probe's own output directory (`--out`).
ELSEWHERE = {("probe/trial.py", "engine.log")}


def _spelled(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in FILE_NAMES:
            found.append((node.lineno, str(node.value)))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            if isinstance(right, ast.Constant) and right.value in DIR_NAMES:
                found.append((right.lineno, str(right.value)))
    return found


def test_no_state_file_name_is_spelled_outside_launcher_state() -> None:
    offenders = []
    for path in sorted(LAUNCHER.rglob("*.py")):
        relative = path.relative_to(LAUNCHER).as_posix()
        if relative.startswith(("state/", "sim/")):  # the simulator is its own program, with no state dir
            continue
        for line, name in _spelled(ast.parse(path.read_text(encoding="utf-8"))):
            if (relative, name) not in ELSEWHERE:
                offenders.append(f"launcher/{relative}:{line}: {name!r}")
    assert offenders == [], "ask StateStore for these paths:\n" + "\n".join(offenders)


def test_the_check_sees_a_name_spelled_by_hand() -> None:
    """The rule above would pass vacuously if it recognised nothing."""
    code = 'a = root / "profiles" / name / "status.json"\nb = History(state / "history.jsonl")\n'
    names = sorted(name for _, name in _spelled(ast.parse(code)))
    assert names == ["history.jsonl", "profiles", "status.json"]


def test_the_store_lays_out_the_documented_paths(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    profile = tmp_path / "profiles" / "prod"
    assert store.history_path == tmp_path / "history.jsonl"
    assert store.status_path("prod") == profile / "status.json"
    assert store.last_good_path("prod") == profile / "last_good.json"
    assert store.last_facts_path("prod") == profile / "last_facts.json"
    assert store.launcher_lock_path("prod") == profile / "launcher.lock"
    assert store.launcher_info_path("prod") == profile / "launcher.json"
    assert store.restart_guard_path("prod") == profile / "restart_guard.json"
    assert store.reloads_dir("prod") == profile / "reloads"
    assert store.change_lock_path("prod") == profile / "change.lock"
    assert store.engine_log("prod") == profile / "logs" / "engine.log"
    assert store.engine_log("prod", try_run=True) == profile / "logs" / "try.log"
    assert store.gpu_lock_path("GPU-1a/2") == tmp_path / "locks" / "gpu-GPU-1a_2.lock"
    assert store.probe_journal_path == tmp_path / "probe" / "journal.json"
    assert store.probe_lock_path == tmp_path / "probe" / "probe.lock"
    assert store.probe_restore_log_path == tmp_path / "probe" / "restored-launcher.log"
    assert store.bug_reports_dir == tmp_path / "bug-reports"
    door = profile / "frontdoor"
    assert store.frontdoor_dir("prod") == door
    assert store.frontdoor_config_path("prod") == door / "caddy.json"
    assert store.frontdoor_target_path("prod") == door / "upstream"
    assert store.frontdoor_admin_socket("prod") == door / "admin.sock"
    assert store.frontdoor_hold_socket("prod") == door / "hold.sock"
    assert store.frontdoor_lock_path("prod") == door / "frontdoor.lock"
