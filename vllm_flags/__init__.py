"""The command lines of the engines the launcher starts, and what vLLM makes of them, as data and rules.

- `schema`: vLLM's option schema (format, snapshot of 0.33.0's parser in `data/`, loaders);
- `schema_extract`: how a snapshot is read out of an installed vLLM's parser;
- `cudagraph_sizes`: the CUDA graphs vLLM captures for given flags (the gate, the dry run and the
  simulator all apply this one rule);
- `sim_flags`: the simulator's own `--sim-*` flags, declared once.

A leaf: it imports nothing of this repository, so the launcher, the gates and the simulator can all
import it without importing each other (tests/unit/test_layering.py).
"""
