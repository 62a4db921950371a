"""The human form of `LogFacts`: a short report an operator reads after a start (or a failed one)."""

from __future__ import annotations

from launcher.logfacts.events import LogEvent
from launcher.logfacts.facts import LogFacts

_UNKNOWN = "not in log"


def render_report(facts: LogFacts) -> str:
    rows = [
        ("vLLM", _identity(facts)),
        ("parallel", _parallel(facts)),
        ("KV pool", _kv(facts)),
        ("CUDA graphs", _graphs(facts)),
        ("load", _load(facts)),
        ("startup", _outcome(facts)),
    ]
    rows += [("marker", _marker(m.pattern, m.found, m.line_no)) for m in facts.markers]
    if len(facts.startups) > 1 or facts.startups_seen > 1:
        rows.append(("startups", _startups(facts)))
    if facts.inferred:
        inferred = ", ".join(f"{key} (from line {ref.line_no})" for key, ref in facts.inferred.items())
        rows.append(("inferred", f"{inferred}: follow from other lines, stated by none"))
    if facts.lines_cut:
        rows.append(
            (
                "note",
                f"{facts.lines_cut} line(s) longer than the parser reads were cut "
                f"({facts.chars_cut:,} characters not read)",
            )
        )
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {text}" for label, text in rows)


def render_events(events: list[LogEvent]) -> str:
    return "\n".join(f"{e.line_no:>7}  {e.kind:<18} {_detail(e)}" for e in events)


def _identity(f: LogFacts) -> str:
    text = f"{f.vllm_version or '?'} · model {f.model or '?'}"
    if f.served_model_name and f.served_model_name != [f.model]:
        text += f" (served as {', '.join(f.served_model_name)})"
    if f.served_url or f.served_port:
        text += f" · {f.served_url or f'port {f.served_port}'}"
    return text


def _parallel(f: LogFacts) -> str:
    parts = [f"TP {_num(f.tensor_parallel_size)}"]
    for name, value in (("PP", f.pipeline_parallel_size), ("DP", f.data_parallel_size)):
        if value and value > 1:
            parts.append(f"{name} {value}")
    parts.append(f"max_model_len {_num(f.max_model_len)}")
    if f.max_num_seqs:
        parts.append(f"max_num_seqs {f.max_num_seqs}")
    if f.gpu_memory_utilization is not None:
        parts.append(f"gpu_memory_utilization {f.gpu_memory_utilization}")
    return " · ".join(parts)


def _kv(f: LogFacts) -> str:
    if f.kv_cache_tokens is None and f.gpu_blocks is None:
        return f"{_UNKNOWN}" + (f" ({f.kv_cache_gib} GiB available)" if f.kv_cache_gib is not None else "")
    if f.kv_cache_tokens is not None:
        text = f"{f.kv_cache_tokens:,} tokens"
    else:
        text = f"{f.gpu_blocks:,} GPU blocks"
    if f.kv_cache_gib is not None:
        text += f" ({f.kv_cache_gib} GiB)"
    if f.max_concurrency is not None:
        text += f"; {f.max_concurrency.value}x requests of {f.max_concurrency.max_model_len:,} tokens"
    ranks = f.kv_cache_tokens_per_rank or []
    if len(set(ranks)) > 1:
        text += f"; per rank {' / '.join(f'{n:,}' for n in ranks)} (smallest shown)"
    return text


def _graphs(f: LogFacts) -> str:
    if f.enforce_eager:
        return "none: eager mode (--enforce-eager)"
    mode = f.cudagraph_mode or "mode not shown"
    sizes = ""
    if f.capture_sizes:
        sizes = f", {len(f.capture_sizes)} sizes ({f.capture_sizes[0]}…{f.capture_sizes[-1]})"
    count = ""
    if f.graphs_captured is not None:
        count = f" {f.graphs_captured}/{f.graphs_expected if f.graphs_expected is not None else '?'}"
    if f.cudagraph_captured:
        took = f" in {f.capture_seconds:.0f} s" if f.capture_seconds is not None else ""
        state = f"captured{count}{took}"
    elif f.cudagraph_captured is False:
        state = f"NOT captured{(' (' + count.strip() + ' before it stopped)') if count else ''}"
    else:
        state = f"capture not finished in log{count}"
    if f.profiling_graphs:
        state += f"; profiling pass {f.profiling_graphs} (not counted)"
    return f"{mode}{sizes}: {state}"


def _load(f: LogFacts) -> str:
    parts = [f"runner {f.model_runner or '?'}"]
    for label, value, unit in (
        ("weights", f.weights_gib, "GiB"),
        ("compile", f.compile_seconds, "s"),
        ("engine init", f.engine_init_seconds, "s"),
    ):
        if value is not None:
            parts.append(f"{label} {value} {unit}")
    return " · ".join(parts)


def _outcome(f: LogFacts) -> str:
    if f.outcome == "ready":
        text = "READY" + (f" after {f.startup_seconds:.0f} s" if f.startup_seconds is not None else "")
        if f.died_after_ready is not None:
            text += f"; engine DIED later (line {f.died_after_ready.line_no}): {f.died_after_ready.line}"
        return text
    if f.outcome == "failed":
        named = f.failure_argument and f"argument {f.failure_argument}"
        where = ", ".join(
            x for x in (named, f.failure_proc, f.failure_phase and f"during {f.failure_phase}") if x
        )
        where = f" ({where})" if where else ""
        return f"FAILED: {f.failure_kind}{where} (line {f.failure_line_no}): {f.failure_line}"
    return "no outcome in log (still starting, or the log was cut)"


def _startups(f: LogFacts) -> str:
    """`12 in this log (ready 1, failed:free_memory 11): facts describe the last one` and the last few."""
    total = sum(f.startup_outcomes.values())
    counts = ", ".join(f"{label} {n}" for label, n in f.startup_outcomes.items())
    recent = "; ".join(
        f"line {s.line_no if s.line_no is not None else '?'} "
        f"{s.outcome or 'no outcome'}{':' + s.failure_kind if s.failure_kind else ''}"
        for s in f.startups[-5:]
    )
    shown = min(5, len(f.startups))
    return f"{total} in this log ({counts}); facts describe the last one. Last {shown}: {recent}"


def _marker(pattern: str, found: bool, line_no: int | None) -> str:
    return f"{pattern}: seen at line {line_no}" if found else f"{pattern}: NOT seen"


def _num(value: int | None) -> str:
    return f"{value:,}" if value is not None else "?"


def _detail(e: LogEvent) -> str:
    return " ".join(f"{k}={v}" for k, v in e.detail.items())
