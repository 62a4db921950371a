"""`launch parse-log`: stdin, markers, the human report, and exit 2 only for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from launcher.cli import launch

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def _run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(launch, ["parse-log", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_stdin_dash_is_the_same_as_the_file() -> None:
    path = LOGS / "v033_logo_color_tp2.log"
    code, out, _ = _run("-", "--json", stdin=path.read_bytes())
    assert code == 0
    assert json.loads(out) == json.loads(_run(str(path), "--json")[1])


def test_real_process_reads_stdin() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.cli", "parse-log", "-", "--json"],
        input=(LOGS / "fail_port_in_use.log").read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert (facts["outcome"], facts["failure_kind"]) == ("failed", "port_in_use")


def test_unreadable_file_exits_2_with_one_line(tmp_path: Path) -> None:
    for target in (tmp_path / "missing.log", tmp_path):
        code, out, err = _run(str(target))
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("error: cannot read log file") and str(target) in err


def test_a_failed_startup_still_exits_0() -> None:
    code, out, _ = _run(str(LOGS / "fail_oom_capture.log"))
    assert code == 0
    assert "FAILED: oom (EngineCore, during capture) (line 30)" in out
    assert "NOT captured (74/102 before it stopped)" in out


def test_markers_found_and_missing() -> None:
    code, out, _ = _run(
        str(LOGS / "capture_fallback_1_2.log"),
        "--json",
        "--marker",
        "IQ4XS_BMMVQ_READY",
        "--marker",
        "^GDN_FUSED_READY$",
    )
    assert code == 0
    markers = json.loads(out)["markers"]
    lines = (LOGS / "capture_fallback_1_2.log").read_bytes().decode().split("\n")
    first = lines.index("IQ4XS_BMMVQ_READY") + 1
    assert markers == [
        {"pattern": "IQ4XS_BMMVQ_READY", "found": True, "line": "IQ4XS_BMMVQ_READY", "line_no": first},
        {"pattern": "^GDN_FUSED_READY$", "found": False, "line": None, "line_no": None},
    ]


def test_bad_marker_is_bad_input() -> None:
    code, out, err = _run(str(LOGS / "v033_tp1_ready.log"), "--marker", "([")
    assert code == 2 and out == "" and "--marker '([' is not a valid regular expression" in err


def test_human_report_and_events() -> None:
    code, out, _ = _run(str(LOGS / "v011_dp0_tp4_per_rank_kv.log"), "--events")
    assert code == 0
    assert "0.11.0 · model /models/Qwen3-9B-AWQ (served as fable-9b) · http://0.0.0.0:8100" in out
    assert "TP 4" in out and "2,512,976 tokens" in out and "per rank 2,513,305 / 2,513,440" in out
    assert "FULL_AND_PIECEWISE, 8 sizes (1…64): captured 14/14 in 3 s" in out and "READY after 60 s" in out
    assert "kv_cache_sized     proc=EngineCore_DP0 tokens=2513305" in out


def test_json_events_key() -> None:
    code, out, _ = _run(str(LOGS / "eager_gb10_no_separators.log"), "--json", "--events")
    payload = json.loads(out)
    assert code == 0 and payload["enforce_eager"] is True
    assert [e["kind"] for e in payload["events"]][-1] == "ready"
