"""What the operator reads: the terminal tables, the summary JSON and the per-request JSONL.

Columns (formulas in docs/bench.md): TTFT cold is measured alone (c1) with a unique prefix and is
the same for every row of a context; TTFT warm, TTFC, decode and output tok/s are medians of rounds.
Times are in ms in both tables, every column names its unit. The second table gives
mean/median/p90/p99 under `vllm bench serve`'s names (`latency.py`), the throughputs in req/s and tok/s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from launcher.bench.cells import CellSummary
from launcher.bench.record import RequestRecord
from launcher.bench.results import RunResult

HEADERS = (
    "context",
    "c",
    "TTFT cold (ms)",
    "TTFT warm (ms)",
    "TTFC (ms)",
    "decode tok/s",
    "output tok/s",
    "chk",
    "spread",
    "hit %",
    "acc %",
    "empty",
    "flags",
)


def millis(value_s: float | None) -> str:
    """Seconds shown in ms, as the second table (`vllm bench serve`'s unit)."""
    return "-" if value_s is None else f"{value_s * 1000:.1f}"


def number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def percent(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}"


def _row(result: RunResult, cell: CellSummary) -> list[str]:
    cold = result.cold_for(cell.context)
    spreads = [
        s for s in (cell.as_json()["spread"].get(k) for k in ("decode_tok_s", "total_tok_s")) if s is not None
    ]
    ok = sum(1 for r in cell.records if r.ok)
    return [
        cell.context,
        str(cell.concurrency),
        millis(cold.ttft_s if cold else None),
        millis(cell.value("ttft_s")),
        millis(cell.value("ttfc_s")),
        number(cell.value("decode_tok_s")),
        number(cell.value("total_tok_s")),
        number(cell.chk, 2),
        f"{max(spreads) * 100:.0f}%" if spreads else "-",
        percent(cell.delta.hit_rate),
        percent(cell.delta.acceptance, 1),
        f"{cell.empty}/{ok}",
        ",".join(sorted({str(f.flag) for f in cell.findings})) or "-",
    ]


# What our own columns mean; the formulas are in docs/bench.md.
LEGEND = """\
TTFT cold: median time to first token of never-seen prefixes sent alone; TTFT warm: the cell's
  median with every prompt cached; TTFC: to the first answer token (reasoning excluded)
decode tok/s: per user, 1 / ITL median; output tok/s: output tokens / round wall (vLLM's
  output_throughput); values are medians of the rounds
chk: decode x c / output tok/s (about 1 = decoding; much more = queueing or prefill)
spread: (max - min) / median between rounds (the larger of decode's and output's)
hit %: prefix-cache hits / queries; acc %: accepted / draft spec tokens (from /metrics deltas)
empty: answers with neither text nor a tool call / requests that succeeded"""

LATENCY_HEADERS = ("context", "c", "metric", "mean", "median", "p90", "p99")
THROUGHPUT_HEADERS = (
    "context",
    "c",
    "completed",
    "failed",
    "request_throughput (req/s)",
    "output_throughput (tok/s)",
    "total_token_throughput (tok/s)",
)
THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput")  # vLLM's names


def _layout(rows: list[list[str]], left: tuple[int, ...]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def table(result: RunResult) -> str:
    rows = [list(HEADERS)] + [_row(result, cell) for cell in result.cells]
    return _layout(rows, (0, len(HEADERS) - 1))


def latency_table(result: RunResult) -> str:
    """TTFT, TPOT, ITL, E2EL in ms, then the throughputs, under `vllm bench serve`'s names."""
    rows = [list(LATENCY_HEADERS)]
    for cell in result.cells:
        m = cell.vllm_bench
        for i, name in enumerate(("ttft", "tpot", "itl", "e2el")):
            stats = [number(m[f"{k}_{name}_ms"], 2) for k in ("mean", "median", "p90", "p99")]
            where = [cell.context, str(cell.concurrency)] if i == 0 else ["", ""]
            rows.append([*where, f"{name.upper()} (ms)", *stats])
    throughput = [list(THROUGHPUT_HEADERS)] + [
        [
            cell.context,
            str(cell.concurrency),
            str(cell.vllm_bench["completed"]),
            str(cell.vllm_bench["failed"]),
            *(number(cell.vllm_bench[k], 2) for k in THROUGHPUT_KEYS),
        ]
        for cell in result.cells
    ]
    return _layout(rows, (0, 2)) + "\n\n" + _layout(throughput, (0,))


def explain(result: RunResult) -> str:
    """The lines under the table: the server, each context's cold evidence, every finding, notes."""
    target, before = result.target, result.before
    uptime = "unknown" if before.uptime_s is None else f"{before.uptime_s:.0f}s"
    out = [
        f"server {target.base_url} ({target.origin}), model {target.model}, up {uptime}"
        + (", reasoning model" if result.reasoning else "")
    ]
    for cold in result.colds:
        tokens = "-" if cold.prompt_tokens is None else f"{cold.prompt_tokens:.0f}"
        out.append(
            f"{cold.context.name}: {tokens} prompt tokens; cold TTFT {millis(cold.ttft_s)} ms "
            f"over {len(cold.records)} unique prefixes; {cold.proof}"
        )
    if result.reasoning:
        shares = [
            f"{c.context} c{c.concurrency} {c.think_share:.0%}"
            for c in result.cells
            if c.think_share is not None
        ]
        out.append("think % (reasoning tokens / output tokens): " + ", ".join(shares))
    seen: set[str] = set()
    for finding in result.all_findings:
        if finding.message not in seen:
            seen.add(finding.message)
            out.append(f"[{finding.flag}] {finding.message}")
    out += [f"note: {n}" for n in result.notes]
    return "\n".join(out)


class RecordSink:
    """Appends each request's JSON line as soon as its round is parsed (a crash keeps what ran)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def open(self) -> RecordSink:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        return self

    def __call__(self, records: Sequence[RequestRecord]) -> None:
        if self._file is None:
            return
        for record in records:
            self._file.write(json.dumps(record.as_json(), ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
