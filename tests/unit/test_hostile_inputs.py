"""Hostile input is normal input: every case below is answered with one paragraph, exit 2 and
nothing written — never a traceback, never exit 1 (which means "a gate failed")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from launcher.errors import BadInput
from launcher.host.unit import render_dropin
from tests.conftest import tree_snapshot

BASE = '[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "m"\n[args]\nmax_num_seqs = 4\n'
INJECTION = 'api_key_env = "AKEY\\nExecStartPre=touch pwned\\n#"'

# (what, the profile's extra TOML, a phrase the error must contain)
BAD_PROFILES: list[tuple[str, str, str]] = [
    ("poll_s = 0", "[gates.health]\npoll_s = 0\n", "must be ≥ 0.05"),
    ("timeout_s = nan", "[gates.health]\ntimeout_s = nan\n", "finite"),
    ("timeout_s = inf", "[gates.health]\ntimeout_s = inf\n", "finite"),
    ("baseline_window = 0", "[gates.memory_leak]\nbaseline_window = 0\n", "must be ≥ 1"),
    ("empty marker", '[gates.kernel_marker]\npatterns = [""]\n', "item 0 is empty"),
    ("marker that matches nothing", '[gates.kernel_marker]\npatterns = [".*"]\n', "empty string"),
    ("markers of ints", "[gates.kernel_marker]\npatterns = [1, 2]\n", "must be a str"),
    ("broken regex", '[gates.kernel_marker]\npatterns = ["("]\n', "not a valid regex"),
    ("no gates", "[gates]\norder = []\n", "no required gate"),
    ("only optional gates", '[gates]\norder = ["health"]\n[gates.health]\nrequired = false\n',
     "no required gate"),
    ("unknown tool case", '[gates.tool_call]\ncases = ["auto", "bogus"]\n', "must be one of"),
    ("unknown smoke check", '[gates.smoke]\nchecks = ["bogus"]\n', "must be one of"),
    ("negative grace", "[supervisor]\nstop_grace_s = -1\n", "must be ≥ 0"),
    ("absurd windows", "[gates.memory_leak]\nwindows = 100000000\n", "must be ≤ 1_000"),
    ("too few windows", "[gates.memory_leak]\nwindows = 4\n", "windows = 4 is too few"),
    ("absurd concurrency", "[gates.memory_leak]\nconcurrency = 100000\n", "must be ≤ 256"),
    ("needle of zero", "[gates.smoke]\nneedle_contexts = [0]\n", "must be ≥ 64"),
    ("bad leak monitor", '[supervisor]\nleak_monitor = "reboot"\n', "must be one of"),
    ("bad on_wedge", '[supervisor]\non_wedge = "reboot"\n', "must be one of"),
    ("canary every 0 s", "[supervisor]\ncanary_interval_s = 0\n", "must be ≥ 1"),
    ("canary deadline nan", "[supervisor]\ncanary_timeout_s = nan\n", "finite"),
    ("canary deadline too short", "[supervisor]\ncanary_timeout_s = 0.1\n", "must be ≥ 0.5"),
    ("wedge after 0", "[supervisor]\nwedge_after = 0\n", "must be ≥ 1"),
    ("wedge after a float", "[supervisor]\nwedge_after = 1.5\n", "wedge_after"),
    ("negative tool-call canaries", "[supervisor]\ncanary_tool_call_every = -1\n", "must be ≥ 0"),
    ("watch as a string", '[supervisor]\nwatch = "yes"\n', "watch"),
    ("park on a public address", '[engine]\nhost = "0.0.0.0"\n[supervisor]\npark = "sleep"\npark_port = 8001\n',
     "anyone who reaches the port can call unauthenticated"),
    ("park without a second port", '[supervisor]\npark = "sleep"\n', "needs supervisor.park_port"),
    ("park on the same port", '[supervisor]\npark = "sleep"\npark_port = 8000\n', "the two must differ"),
    ("park against its own flag", '[args]\nenable_sleep_mode = false\n[supervisor]\npark = "sleep"\npark_port = 8001\n',
     "contradict"),
    ("an unknown park", '[supervisor]\npark = "hibernate"\n', "must be one of"),
    ("a switch hook with a bad placeholder", '[supervisor]\non_switch = ["/bin/true", "{gpu}"]\n',
     "unknown placeholder {gpu}"),
    ("an empty switch hook", "[supervisor]\non_switch = []\n", "is empty"),
    ("a switch hook with a newline", '[supervisor]\non_switch = ["/bin/true\\nx"]\n', "control character"),
    ("bad schema", '[engine]\nschema = "latest"\n', "must be one of"),
    ("port 0", "[engine]\nport = 0\n", "engine.port = 0: must be ≥ 1"),
    ("unit injection", f"[engine]\n{INJECTION}\n", "environment variable name"),
    ("newline in an env value", '[env]\nVLLM_X = "a\\nb"\n', "control character"),
    ("NUL in an argv value", '[args]\nserved_model_name = "a\\u0000b"\n', "control character"),
    ("newline in the host", '[engine]\nhost = "h\\nExecStart=/bin/sh"\n', "control character"),
    ("deep nesting", "x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
]


def _profile(profiles: Path, extra: str) -> None:
    """BASE plus `extra`; an `[engine]` or `[args]` table in `extra` is merged into BASE's own."""
    table, _, rest = extra.partition("\n")
    if table in ("[engine]", "[args]"):
        text = BASE.replace(table + "\n", table + "\n" + rest, 1)
    else:
        text = BASE + extra
    (profiles / "p.toml").write_text(text)


def _run(profiles: Path, state: Path, *args: str) -> Result:
    return CliRunner().invoke(launch, ["--profiles-dir", str(profiles), "--state-dir", str(state), *args])


def _assert_refused(result: Result, phrase: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and phrase in result.output, result.output


@pytest.mark.parametrize(("what", "extra", "phrase"), BAD_PROFILES, ids=[c[0] for c in BAD_PROFILES])
def test_a_bad_setting_is_refused_by_the_dry_run(tmp_path: Path, what: str, extra: str, phrase: str) -> None:
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    _profile(profiles, extra)
    before = tree_snapshot(tmp_path)
    _assert_refused(_run(profiles, state, "--profile", "p", "--dry-run"), phrase)
    assert tree_snapshot(tmp_path) == before and not state.exists()


def test_the_unit_injection_never_reaches_a_drop_in(tmp_path: Path) -> None:
    """Was: `launch install-unit` wrote `ExecStartPre=touch pwned` as a live line of the drop-in."""
    profiles, units = tmp_path / "profiles", tmp_path / "units"
    profiles.mkdir()
    _profile(profiles, f"[engine]\n{INJECTION}\n")
    result = _run(profiles, tmp_path / "state", "install-unit", "--profile", "p", "--unit-dir", str(units))
    _assert_refused(result, "environment variable name")
    assert not units.exists()
    for hostile in ("AKEY\nExecStartPre=touch pwned", "A B", "A=B", "", "1A", "A\x00"):
        with pytest.raises(BadInput):
            render_dropin("p", tmp_path, tmp_path, hostile)
    for name in ("p\nExecStart=x", "../p", "p q", "x" * 65):
        with pytest.raises(BadInput):
            render_dropin(name, tmp_path, tmp_path, None)
    for path in (tmp_path / "a\nb", tmp_path / "a b", tmp_path / 'a"b', tmp_path / "a\\b"):
        with pytest.raises(BadInput):
            render_dropin("p", path, tmp_path, None)
    escaped = render_dropin("p", tmp_path, Path("/srv/100%/state"), None)
    assert "Environment=VLLM_GATE_STATE=/srv/100%%/state" in escaped


BAD_NAMES = ["../../outside/x", "/abs/x", "x" * 300, "p\n", "p/q", "..", ".hidden", "p q", "", "-p"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_a_bad_profile_name_writes_nothing(tmp_path: Path, name: str) -> None:
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    _run_and_refuse = _run(profiles, state, "--profile", name)
    _assert_refused(_run_and_refuse, "profile")
    assert not state.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["profiles"]


BAD_TAGS = ["T\n", "../x", "a/b", "x" * 65, ".", ".."]


@pytest.mark.parametrize("tag", BAD_TAGS, ids=range(len(BAD_TAGS)))
def test_a_bad_tag_writes_nothing(tmp_path: Path, tag: str) -> None:
    """Was: `--tag $'T\\n'` created `prod.toml.bak_T\\n`."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    _profile(profiles, "")
    before = tree_snapshot(tmp_path)
    result = _run(profiles, tmp_path / "state", "set", "p", "max_num_seqs=2", "--tag", tag)
    _assert_refused(result, "invalid tag")
    assert tree_snapshot(tmp_path) == before


STATUS_FILES = [b"{}", b'{"phase": 3}', b'{"phase": "serving", "gates": [1]}', b"\xff\xfe",
                b'{"phase": "serving", "launcher_pid": "x"}', b"[" * 100000]  # fmt: skip


@pytest.mark.parametrize("content", STATUS_FILES, ids=range(len(STATUS_FILES)))
def test_a_corrupt_status_file_is_refused_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "state" / "profiles" / "p" / "status.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    _assert_refused(_run(tmp_path / "profiles", tmp_path / "state", "status"), str(path))


def test_corrupt_history_records_are_skipped_and_the_rest_shown(tmp_path: Path) -> None:
    history = tmp_path / "state" / "history.jsonl"
    history.parent.mkdir(parents=True)
    good = json.dumps({"ts": "2026-01-01T00:00:00.000000Z", "event": "promoted", "profile": "p"})
    junk = [b"\xff\xfe\n", b'{"ts": 1, "event": "x"}\n', b'{"ts": "t", "event": "x", "profile": [1]}\n',
            b"[1, 2]\n", b'{"ts": "t", "eve\n', b"[" * 100000 + b"\n"]  # fmt: skip
    history.write_bytes(b"".join(junk) + good.encode() + b"\n")
    result = _run(tmp_path / "profiles", tmp_path / "state", "history")
    assert result.exit_code == 0, result.output
    assert "promoted" in result.output and "Traceback" not in result.output


def test_a_corrupt_last_good_is_refused_naming_it(tmp_path: Path) -> None:
    from launcher.state.store import StateStore

    store = StateStore(tmp_path)
    path = store.profile_dir("p") / "last_good.json"
    path.parent.mkdir(parents=True)
    corrupt = ("{}", '{"argv": "vllm serve", "env": {}, "fingerprint": "f"}', '{"argv": [], "env": {"A": 1}}')
    for content in corrupt:
        path.write_text(content)
        with pytest.raises(BadInput, match="last_good.json is corrupt"):
            store.last_good_to_start("p")


def test_the_last_good_reader_knows_every_expectation_the_launcher_writes() -> None:
    """A field added to Expectations without a check would make every new last_good.json 'corrupt'."""
    from dataclasses import asdict, fields

    from gates.context import Expectations
    from launcher.state.records import EXPECTATION_CHECKS, _expectations

    assert {f.name for f in fields(Expectations)} == set(EXPECTATION_CHECKS)
    written = json.loads(json.dumps(asdict(Expectations(served_model_names=("m",), capture_sizes=(1, 2)))))
    assert _expectations(written)



@pytest.mark.parametrize(
    ("command", "phrase"),
    [("5", "expected list of str"), ("true", "expected list of str"), ('["vllm", 3]', "item 1 (3) must be a str"),
     ("[{ a = 1 }]", "item 0 ({'a': 1}) must be a str"), ("[]", "a non-empty list of strings")],
)  # fmt: skip
def test_a_command_that_is_not_strings_is_refused_not_a_crash(tmp_path: Path, command: str, phrase: str) -> None:
    """Was: `command = 5` (or a number or table in the list) crashed the dry run with exit 70."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "p.toml").write_text(f'[engine]\nmodel = "m"\ncommand = {command}\n')
    _assert_refused(_run(profiles, tmp_path / "state", "--profile", "p", "--dry-run"), phrase)


def test_each_bad_value_is_reported_once(tmp_path: Path) -> None:
    """Was: the port's range, the command's items and leak_monitor's choices were checked twice, by
    their declarations and again by hand, so each of these bad values gave two errors."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "p.toml").write_text(
        '[engine]\nmodel = "m"\nport = 70000\ncommand = ["vllm", 3]\n[supervisor]\nleak_monitor = "reboot"\n'
    )
    result = _run(profiles, tmp_path / "state", "--profile", "p", "--dry-run")
    _assert_refused(result, "engine.port = 70000: must be ≤ 65_535")
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert sorted(e.split(": ")[2].split(" = ")[0] for e in errors) == [
        "engine.command", "engine.port", "supervisor.leak_monitor"
    ], errors  # fmt: skip
