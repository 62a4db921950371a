"""vllm-gate: profiles → vLLM argv/env, preflight, gate chain, promotion and rollback."""

from __future__ import annotations

__version__ = "0.1.0"
