"""vllm-sim: a simulator of `vllm serve` as seen from outside (argv, log, HTTP, processes, memory, faults).

It is the engine of the demo profile and the server the integration tests start. It never imports
the log parser (`launcher.logfacts`): both read the same facts (docs/vllm-facts.md) independently, so one
cannot hide the other's mistakes.
"""

from __future__ import annotations
