"""The run's results as values: cold-TTFT phases, cells, run-level findings, and the summary JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from launcher.bench.cells import CellSummary
from launcher.bench.checks import Finding
from launcher.bench.options import BenchOptions
from launcher.bench.record import RequestRecord
from launcher.bench.server_metrics import MetricsDelta, MetricsSnapshot
from launcher.bench.stats import median, spread
from launcher.bench.target import Target
from launcher.bench.workload import ContextSpec


@dataclass(frozen=True, slots=True)
class ColdResult:
    """TTFT of requests whose prefix nobody sent before, one at a time, with the cache's testimony."""

    context: ContextSpec
    records: tuple[RequestRecord, ...]
    delta: MetricsDelta
    proof: str
    findings: tuple[Finding, ...]

    @property
    def ttft_s(self) -> float | None:
        return median(r.ttft_s for r in self.records if r.ok)

    @property
    def prompt_tokens(self) -> float | None:
        return median(r.prompt_tokens for r in self.records if r.ok)

    def as_json(self) -> dict[str, Any]:
        values = [r.ttft_s for r in self.records if r.ok]
        return {
            "context": self.context.name,
            "target_tokens": self.context.tokens,
            "prompt_tokens": self.prompt_tokens,
            "cold_ttft_s": self.ttft_s,
            "cold_ttft_samples_s": values,
            "spread": spread(values),
            "prefix_hit_rate": self.delta.hit_rate,
            "prefix_hits": self.delta.prefix_hits,
            "prefix_queries": self.delta.prefix_queries,
            "proof": self.proof,
            "flags": [f.as_json() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: str
    target: Target
    options: BenchOptions
    before: MetricsSnapshot
    token_ratios: dict[str, float]
    reasoning: bool
    colds: tuple[ColdResult, ...]
    cells: tuple[CellSummary, ...]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]

    def cold_for(self, context: str) -> ColdResult | None:
        return next((c for c in self.colds if c.context.name == context), None)

    @property
    def all_findings(self) -> list[Finding]:
        out = list(self.findings)
        for cold in self.colds:
            out += cold.findings
        for cell in self.cells:
            out += cell.findings
        return out

    def as_json(self) -> dict[str, Any]:
        opts = asdict(self.options)
        opts["contexts"] = [c.name for c in self.options.contexts]
        return {
            "run_id": self.run_id,
            "server": {
                "url": self.target.base_url,
                "origin": self.target.origin,
                "model": self.target.model,
                "max_model_len": self.target.max_model_len,
                "uptime_s": self.before.uptime_s,
                "requests_served_before": self.before.requests_served,
                "reasoning_model": self.reasoning,
                "prefix_cache_metrics": self.before.has_prefix_cache,
                "spec_decode_metrics": self.before.has_spec_decode,
                "metrics_error": self.before.error,
            },
            "options": opts,
            "token_ratios": self.token_ratios,
            "contexts": [c.as_json() for c in self.colds],
            "cells": [c.as_json() for c in self.cells],
            "flags": [f.as_json() for f in self.findings],
            "notes": list(self.notes),
            "flag_counts": _counts(self.all_findings),
        }


def _counts(findings: list[Finding]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in findings:
        out[str(f.flag)] = out.get(str(f.flag), 0) + 1
    return out
