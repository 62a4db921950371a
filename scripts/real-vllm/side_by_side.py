"""GuideLLM beside `launch bench` on one server (check-i22.sh step 6): the workload, then one table.

    side_by_side.py workload BENCH_SUMMARY [--processor DIR] [--levels 1,8,64]
        one line per context of the bench: CONTEXT TEXT_TOKENS OUTPUT_TOKENS LEVELS COUNTS, the
        GuideLLM synthetic workload that matches it (prompt text tokens = the bench's mean prompt
        tokens less the chat template's own, counted with DIR's tokenizer; output tokens = the
        bench's max_tokens; its concurrency levels, or those of --levels it has, and each cell's
        request count)
    side_by_side.py table BENCH_SUMMARY CONTEXT=GUIDELLM_JSON...
        one markdown table: per context and concurrency, both tools' TTFT, ITL, TPOT and E2EL
        (median / p99, ms), output tok/s, and the mean prompt and output tokens each tool sent

BENCH_SUMMARY is `launch bench`'s summary.json (launcher/bench/report.py: each cell carries the
`vllm bench serve` names, launcher/bench/latency.py); GUIDELLM_JSON is GuideLLM 0.8.1's
`--output kind=json` report. The table takes each tool's figures as that tool defines them: the
definitions differ (docs/real-vllm.md, "What differs in how they measure"), and the table does not
convert one into the other. `table` needs only the standard library; `workload --processor`
needs `transformers` (the GPU machine's image has it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

METRICS = ("TTFT", "ITL", "TPOT", "E2EL")
BENCH_KEYS = {"TTFT": "ttft", "ITL": "itl", "TPOT": "tpot", "E2EL": "e2el"}
# GuideLLM's distribution of each metric and the factor to ms (request_latency is in seconds).
GUIDELLM_KEYS = {
    "TTFT": ("time_to_first_token_ms", 1.0),
    "ITL": ("inter_token_latency_ms", 1.0),
    "TPOT": ("time_per_output_token_ms", 1.0),
    "E2EL": ("request_latency", 1000.0),
}
USAGE = __doc__.split("\n\n")[1]


class BadReport(Exception):
    """A report that is not the shape this script reads: named, with the file."""


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadReport(f"{path}: cannot read it as JSON ({err})") from err
    if not isinstance(data, dict):
        raise BadReport(f"{path}: not a JSON object")
    return data


def _number(value: Any, factor: float = 1.0) -> float | None:
    return float(value) * factor if isinstance(value, int | float) else None


def bench_rows(summary: dict[str, Any], path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """`launch bench` cells keyed by (context, concurrency)."""
    cells = summary.get("cells")
    if not isinstance(cells, list):
        raise BadReport(f"{path}: no 'cells' list: not a launch bench summary.json")
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for cell in cells:
        done = cell.get("completed") or 0
        row: dict[str, Any] = {
            "requests": done,
            "in_tok": cell["total_input_tokens"] / done if done else None,
            "out_tok": cell["total_output_tokens"] / done if done else None,
            "tok_s": _number(cell.get("output_throughput")),
        }
        for metric, key in BENCH_KEYS.items():
            row[metric] = (_number(cell.get(f"median_{key}_ms")), _number(cell.get(f"p99_{key}_ms")))
        rows[(str(cell["context"]), int(cell["concurrency"]))] = row
    return rows


def _successful(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    node = metrics.get(name, {}).get("successful")
    return node if isinstance(node, dict) else {}


def guidellm_rows(report: dict[str, Any], context: str, path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """GuideLLM benchmarks keyed by (context, concurrency): one per `--profile kind=concurrent` level."""
    benchmarks = report.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise BadReport(f"{path}: no 'benchmarks' list: not a GuideLLM JSON report")
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for bench in benchmarks:
        strategy = bench.get("config", {}).get("strategy", {})
        if strategy.get("type_") != "concurrent":
            raise BadReport(
                f"{path}: a {strategy.get('type_')!r} benchmark; the table compares concurrent ones"
            )
        metrics = bench.get("metrics", {})
        row: dict[str, Any] = {
            "requests": metrics.get("request_totals", {}).get("successful"),
            "in_tok": _number(_successful(metrics, "prompt_token_count").get("mean")),
            "out_tok": _number(_successful(metrics, "output_token_count").get("mean")),
            # What GuideLLM's console prints as output tokens per second (outputs/console.py).
            "tok_s": _number(metrics.get("output_tokens_per_second", {}).get("total", {}).get("mean")),
        }
        for metric, (name, factor) in GUIDELLM_KEYS.items():
            dist = _successful(metrics, name)
            row[metric] = (
                _number(dist.get("median"), factor),
                _number(dist.get("percentiles", {}).get("p99"), factor),
            )
        rows[(context, int(strategy["streams"]))] = row
    return rows


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(
    bench: dict[tuple[str, int], dict[str, Any]], guide: dict[tuple[str, int], dict[str, Any]]
) -> Iterator[str]:
    """The markdown table: both tools' rows for every (context, concurrency) either measured."""
    head = ["context", "c", "tool", "requests", "in tok", "out tok"]
    head += [f"{m} ms median / p99" for m in METRICS] + ["output tok/s"]
    yield _line(head)
    yield _line(["---"] * len(head))
    order = sorted(set(bench) | set(guide), key=lambda key: (_context_order(bench, key[0]), key[1]))
    for key in order:
        for tool, rows in (("launch bench", bench), ("guidellm", guide)):
            row = rows.get(key)
            if row is None:
                yield _line([key[0], str(key[1]), tool, "not run"] + [""] * (len(head) - 4))
                continue
            cells = [
                key[0],
                str(key[1]),
                tool,
                str(row["requests"]),
                _num(row["in_tok"], 1),
                _num(row["out_tok"], 1),
            ]
            cells += [f"{_num(row[m][0])} / {_num(row[m][1])}" for m in METRICS]
            yield _line(cells + [_num(row["tok_s"], 0)])


def _context_order(bench: dict[tuple[str, int], dict[str, Any]], context: str) -> int:
    contexts = list(dict.fromkeys(c for c, _ in bench))
    return contexts.index(context) if context in contexts else len(contexts)


def template_tokens(processor: str) -> int:
    """Tokens the chat template adds around one user message (vLLM's usage counts them too)."""
    from transformers import AutoTokenizer  # the image's; only this command needs it

    tok = AutoTokenizer.from_pretrained(processor)
    out = tok.apply_chat_template(
        [{"role": "user", "content": ""}], add_generation_prompt=True, tokenize=True
    )
    ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
    return len(ids)


def workload(
    summary: dict[str, Any], path: Path, template: int, only: set[int] | None = None
) -> Iterator[str]:
    """CONTEXT TEXT_TOKENS OUTPUT_TOKENS LEVELS COUNTS for each context the bench measured."""
    max_tokens = summary.get("options", {}).get("max_tokens")
    if not isinstance(max_tokens, int):
        raise BadReport(f"{path}: no options.max_tokens: not a launch bench summary.json")
    by_context: dict[str, list[dict[str, Any]]] = {}
    for cell in summary.get("cells") or []:
        by_context.setdefault(str(cell["context"]), []).append(cell)
    for context, cells in by_context.items():
        cells.sort(key=lambda c: int(c["concurrency"]))
        prompts = sum(c["total_input_tokens"] for c in cells) / max(1, sum(c["completed"] for c in cells))
        run = [c for c in cells if only is None or int(c["concurrency"]) in only]
        if not run:
            raise BadReport(
                f"{path}: the bench measured none of the levels {sorted(only or ())} in {context}"
            )
        levels = ",".join(str(c["concurrency"]) for c in run)
        counts = ",".join(str(c["requests"]) for c in run)
        yield f"{context} {max(1, round(prompts) - template)} {max_tokens} {levels} {counts}"


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[3:-1] else None


def main(argv: list[str]) -> int:
    try:
        if len(argv) >= 3 and argv[1] == "workload":
            path = Path(argv[2])
            processor = _option(argv, "--processor")
            levels = _option(argv, "--levels")
            if levels is not None and not all(part.isdigit() for part in levels.split(",")):
                raise BadReport(f"--levels {levels!r}: concurrency levels are numbers with commas, as 1,8,64")
            only = {int(level) for level in levels.split(",")} if levels else None
            template = template_tokens(processor) if processor else 0
            print("\n".join(workload(_load(path), path, template, only)))
            return 0
        if len(argv) >= 4 and argv[1] == "table" and all("=" in a for a in argv[3:]):
            path = Path(argv[2])
            guide: dict[tuple[str, int], dict[str, Any]] = {}
            for arg in argv[3:]:
                context, report = arg.split("=", 1)
                guide.update(guidellm_rows(_load(Path(report)), context, Path(report)))
            print("\n".join(table(bench_rows(_load(path), path), guide)))
            return 0
    except BadReport as err:
        print(f"side_by_side.py: {err}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        print(
            f"side_by_side.py: a report lacks what it should have ({err!r}): is it the right file?",
            file=sys.stderr,
        )
        return 2
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
