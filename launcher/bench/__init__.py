"""`launch bench`: serving measurements that measure the server, not the tool.

Every trap the operator fell into while benchmarking vLLM by hand has a check here that catches it
by itself (docs/bench.md lists them with their formulas): nested "cold" prefixes, identical
temperature-0 prompts faking spec-decode acceptance, content deltas counted as tokens, prefill
averaged into per-token rates, different prompts per concurrency level, partial warm-up, reasoning
spending all of `max_tokens`, degenerate answers, and a first run after a restart.
"""

from __future__ import annotations
