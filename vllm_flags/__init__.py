"""The command lines of the engines the launcher starts, as data: `vllm serve`'s and `vllm-sim`'s.

- `schema`: vLLM's option schema (format, snapshot of 0.33.0's parser in `data/`, loaders);
- `schema_extract`: how a snapshot is read out of an installed vLLM's parser;
- `sim_flags`: the simulator's own `--sim-*` flags, declared once.

A leaf: it imports nothing of this repository, so the launcher, the gates and the simulator can all
import it without importing each other (tests/unit/test_layering.py).
"""
