"""`vllm-sim serve MODEL [vLLM flags] [--sim-* flags]`: the console script.

The option schema comes from `VLLM_SIM_SCHEMA` (a snapshot JSON file) when set, else from the
committed snapshot of vLLM 0.33.0's parser (`vllm_flags.schema.load_snapshot`), never from an
installed vLLM.

Everything else is imported inside `main`: the engine core is a spawned process, and spawn runs
this script again as `__mp_main__` there, where only the engine's own modules are needed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from vllm_flags.schema import VllmSchema


def _schema() -> VllmSchema:
    from vllm_flags.schema import load_file, load_snapshot

    path = os.environ.get("VLLM_SIM_SCHEMA")
    if path:
        return load_file(Path(path))
    return load_snapshot()


def main(argv: list[str] | None = None) -> int:
    from vllm_sim.serve_args import SimArgumentError, parse
    from vllm_sim.versions import dialect_for

    args = sys.argv[1:] if argv is None else argv
    try:
        schema = _schema()
    except (OSError, ValueError, KeyError) as err:
        print(
            f"vllm-sim: cannot read the vLLM option schema: {err} "
            "(set VLLM_SIM_SCHEMA to a schema snapshot JSON file)",
            file=sys.stderr,
        )
        return 2
    try:
        ns = parse(args, schema)
    except SimArgumentError as err:
        print(f"vllm: error: {err}", file=sys.stderr)
        return 2
    if ns.version:
        print(dialect_for(os.environ.get("VLLM_SIM_VLLM_VERSION", "0.33")).version)
        return 0
    if ns.subparser != "serve":
        print("usage: vllm-sim serve MODEL [vLLM flags] [--sim-* flags]", file=sys.stderr)
        return 2
    return _serve(ns, schema)


def _serve(ns: argparse.Namespace, schema: VllmSchema) -> int:
    """`vllm-sim serve`: the settings resolved (or refused), then the API server until it ends."""
    from vllm_sim import lifecycle
    from vllm_sim.api_server import ApiServer
    from vllm_sim.config import StartupRefused, from_namespace
    from vllm_sim.faults import BadFaultFlag
    from vllm_sim.logline import LogWriter
    from vllm_sim.versions import dialect_for

    try:
        cfg = from_namespace(ns, schema)
    except BadFaultFlag as err:  # a fault no run could honour: a usage error, nothing started
        print(f"vllm: error: {err}", file=sys.stderr)
        return 2
    except StartupRefused as err:
        from vllm_sim import announce

        announce.refused(LogWriter("APIServer", dialect_for(ns.sim_vllm_version)), err.lines)
        return 1
    code = ApiServer(cfg, schema).run()
    lifecycle.leave(code)  # its children were stopped, or deliberately left: nothing to wait for


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
