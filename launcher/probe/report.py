"""What the operator reads: report.md (tables of arms × metrics) and probe.json (everything, for tools).

Every number shown was measured in this probe; the report says what differs outside the noise and
what was not measured, and recommends nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launcher.probe.compare import ArmResult, Delta, MetricKey, Stat, Verdict
from launcher.probe.results import ArmOutcome, ArmRun, ProbeResult

METRIC_ORDER = ("cold_ttft_s", "ttft_s", "decode_tok_s", "total_tok_s")


def value_text(key: MetricKey, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f} s" if key.info.unit == "s" else f"{value:.1f}"


def stat_text(key: MetricKey, stat: Stat | None) -> str:
    if stat is None:
        return "-"
    spread = f" [{stat.run_spread:.1%}]" if stat.run_spread is not None else ""
    return value_text(key, stat.value) + spread


def delta_text(d: Delta | None) -> str:
    if d is None or d.relative is None:
        return ""
    shown = f"{d.relative:+.1%}"
    if d.verdict is Verdict.NOISE:
        return f" ({shown}, noise)"
    if d.verdict is Verdict.UNKNOWN:
        return f" ({shown}, no spread to judge)"
    return f" (**{shown}, {d.verdict}**)"


def cells(results: Sequence[ArmResult]) -> list[tuple[str, int]]:
    """(context, concurrency) of every measured cell, in the bench's order."""
    seen: dict[tuple[str, int], None] = {}
    for result in results:
        for key in result.stats:
            if key.concurrency:
                seen[(key.context, key.concurrency)] = None
    return list(seen)


def markdown(result: ProbeResult, compared: Sequence[ArmResult]) -> str:
    lines = [f"# launch probe: {result.profile}", "", *_head_lines(result)]
    lines += ["", "## Arms", "", *_arm_table(result, compared)]
    measured = [c for c in compared if c.stats]
    for context, concurrency in cells(measured):
        lines += [
            "",
            f"## {context}, concurrency {concurrency}",
            "",
            *_cell_table(context, concurrency, measured),
        ]
    lines += [
        "",
        "Values are medians of the runs used; [x%] is their run-to-run spread, (max − min) / median. "
        "A delta is noise when it lies inside the larger spread of the two arms (run-to-run or "
        "round-to-round).",
    ]
    lines += ["", "## Measured differences", ""] + findings(compared)
    flagged = flag_lines(compared)
    if flagged:
        lines += ["", "## Flags", ""] + flagged
    lines += ["", "## Not measured", ""] + not_measured(result)
    return "\n".join(lines) + "\n"


def _head_lines(result: ProbeResult) -> list[str]:
    """The probe, its settings, production before and after, and why it stopped early if it did."""
    s = result.settings
    lines = [
        f"- probe `{result.probe_id}`, {result.started_at} → {result.finished_at}; "
        f"{s.runs} run(s) per arm after {s.warmup_requests} warm-up requests; bench {s.describe_bench()}",
        f"- production before: {result.production.describe()}",
        f"- production after: {restore_text(result)}",
    ]
    if result.interrupted_by:
        lines.append(f"- interrupted by {result.interrupted_by}: the arms after it were not run")
    if result.error:
        lines.append(f"- error: {result.error}")
    return lines


def _arm_table(result: ProbeResult, compared: Sequence[ArmResult]) -> list[str]:
    """One row per arm run: what it changes, how it ended, the kinds of its flags."""
    lines = ["| # | arm | changes | outcome | flags |", "|---|---|---|---|---|"]
    by_name = {c.name: c for c in compared}
    for run in result.runs:
        flags = by_name[run.arm.name].flags if run.arm.name in by_name else ()
        lines.append(
            f"| {run.arm.index} | {run.arm.name} | {_changes(run)} | {_outcome(run)} | "
            f"{', '.join(sorted({str(f.kind) for f in flags})) or '-'} |"
        )
    return lines


def _cell_table(context: str, concurrency: int, measured: Sequence[ArmResult]) -> list[str]:
    """One cell's metrics, an arm a row: each value with its spread and its delta to the baseline."""
    keys = [MetricKey(context, 0, METRIC_ORDER[0])] + [
        MetricKey(context, concurrency, m) for m in METRIC_ORDER[1:]
    ]
    lines = ["| arm | " + " | ".join(k.info.label for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for arm in measured:
        row = [stat_text(k, arm.stats.get(k)) + delta_text(arm.deltas.get(k)) for k in keys]
        lines.append(f"| {arm.name} | " + " | ".join(row) + " |")
    return lines


def restore_text(result: ProbeResult) -> str:
    restored = result.restored
    if restored is None:
        return "not attempted"
    serving = restored.serving
    if serving is None:
        return restored.action
    state = {"serving": "serving again", "serving_last_good": "serving LAST-GOOD (the profile was rejected)"}
    text = f"{state.get(serving.phase, 'NOT serving: ' + serving.phase)} ({restored.action}"
    text += f", serving {serving.seconds:.1f} s later)" if serving.ok else ")"
    if result.downtime_s is not None:
        text += f"; downtime {result.downtime_s:.1f} s from stop to serving"
    if restored.arm_leftovers:
        text += f"; arm processes ended while restoring: {list(restored.arm_leftovers)}"
    return text


def findings(compared: Sequence[ArmResult]) -> list[str]:
    out = []
    for arm in compared[1:]:
        if not arm.stats:
            continue
        outside = arm.outside_noise()
        if not outside:
            out.append(f"- {arm.name}: no difference to {compared[0].name} outside the noise.")
            continue
        parts = [
            f"{k.label} {d.relative:+.1%} ({d.verdict}; noise band {(d.band or 0):.1%})"
            for k, d in outside
            if d.relative is not None
        ]
        caveat = " — runs disagree, treat as unsettled" if arm.unsettled else ""
        out.append(f"- {arm.name}: " + "; ".join(parts) + caveat + ".")
    return out or ["- no arm besides production was measured."]


def flag_lines(compared: Sequence[ArmResult]) -> list[str]:
    out = [f"- {arm.name}: [{f.kind}] {f.message}" for arm in compared for f in arm.flags]
    out += [
        f"- {arm.name}: bench flagged {', '.join(arm.bench_flags)} (see its summary.json)"
        for arm in compared
        if arm.bench_flags
    ]
    return out


def not_measured(result: ProbeResult) -> list[str]:
    b = result.settings.bench
    out = [
        f"- other contexts than {', '.join(c.name for c in b.contexts)} and other concurrency than "
        f"{', '.join(str(c) for c in b.concurrency)};",
        "- answer quality beyond the bench's empty/degenerate checks, and memory over hours;",
    ]
    if result.production.running:
        uptime = result.production.uptime_s
        up = "up for an unknown time" if uptime is None else f"up {_duration(uptime)}"
        warm = result.settings.warmup_requests
        out.append(
            f"- arm 0 was measured as it served ({up}); the other arms right after their start and "
            f"{warm} warm-up requests."
        )
    skipped = [r.arm.name for r in result.runs if r.outcome is not ArmOutcome.MEASURED]
    if skipped:
        out.append(f"- arms without numbers: {', '.join(skipped)} (see the Arms table).")
    return out


def _changes(run: ArmRun) -> str:
    if run.arm.is_production:
        return "production as it serves"
    diff = "; ".join(_change(c.what, c.new) for c in run.arm.changes)
    return f"`{run.arm.describe_keys()}` → `{diff}`"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _change(what: str, new: str | None) -> str:
    """`--max-num-seqs 32`, `VLLM_X=0`, `--enforce-eager`, `--max-num-seqs (removed)`."""
    if what.startswith("env "):
        return f"{what[4:]}={new}" if new is not None else f"{what[4:]} (removed)"
    return f"{what} {new}".rstrip() if new is not None else f"{what} (removed)"


def _outcome(run: ArmRun) -> str:
    if run.outcome is ArmOutcome.MEASURED:
        gates = "gates passed" if run.gates else "gates not re-run"
        return f"measured ({gates}, {len(run.summaries)} run(s), {run.seconds:.0f} s)"
    return f"{run.outcome}" + (f": {run.detail}" if run.detail else "")


def to_json(result: ProbeResult, compared: Sequence[ArmResult]) -> dict[str, Any]:
    by_name = {c.name: c for c in compared}
    restored = result.restored
    return {
        "probe_id": result.probe_id,
        "profile": result.profile,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "settings": {
            "runs": result.settings.runs,
            "warmup_requests": result.settings.warmup_requests,
            "bench": result.settings.describe_bench(),
        },
        "production": {k: v for k, v in result.production.to_json().items() if k != "env"},
        "stop": result.stop_how,
        "restore": None
        if restored is None
        else {
            "ok": restored.ok,
            "action": restored.action,
            "phase": restored.serving.phase if restored.serving else None,
            "launcher_pid": restored.serving.launcher_pid if restored.serving else None,
            "seconds_to_serving": restored.serving.seconds if restored.serving else None,
            "arm_leftovers": list(restored.arm_leftovers),
            "journal_cleared": restored.journal_cleared,
        },
        "downtime_s": result.downtime_s,
        "interrupted_by": result.interrupted_by,
        "error": result.error,
        "notes": list(result.notes),
        "arms": [_arm_json(run, by_name.get(run.arm.name)) for run in result.runs],
    }


def _arm_json(run: ArmRun, compared: ArmResult | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "index": run.arm.index,
        "name": run.arm.name,
        "keys": list(run.arm.assignments),
        "changes": [c.to_json() for c in run.arm.changes],
        "fingerprint": run.fingerprint,
        "outcome": str(run.outcome),
        "detail": run.detail,
        "seconds": round(run.seconds, 3),
        "release": run.release,
        "gates": [
            {"name": g.get("name"), "verdict": g.get("verdict"), "summary": g.get("summary")}
            for g in run.gates
        ],
        "run_folders": [str(run.measurement.folder / f"run-{k}") for k in range(1, len(run.summaries) + 1)]
        if run.measurement
        else [],
        "metrics": [],
        "flags": [],
        "bench_flags": [],
    }
    if compared is None:
        return data
    for key, stat in sorted(compared.stats.items()):
        d = compared.deltas.get(key)
        data["metrics"].append(
            {
                "context": key.context,
                "concurrency": key.concurrency or None,
                "metric": key.metric,
                "value": stat.value,
                "runs": list(stat.runs),
                "runs_used": list(stat.used),
                "run_spread": stat.run_spread,
                "round_spread": stat.round_spread,
                "delta": d.relative if d else None,
                "noise_band": d.band if d else None,
                "verdict": str(d.verdict) if d else None,
            }
        )
    data["flags"] = [{"flag": str(f.kind), "message": f.message} for f in compared.flags]
    data["bench_flags"] = list(compared.bench_flags)
    return data
