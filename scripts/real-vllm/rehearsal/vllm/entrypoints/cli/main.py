"""`python3 -m vllm.entrypoints.cli.main serve ...` as vllm-sim speaking vLLM 0.26 (see ../../__init__.py).

VLLM_SIM_ORPHANS is not set: whether vLLM 0.26's engine outlives a killed API server is what step 4
measures on the real one.
"""

import os
import sys

from vllm_sim.cli import main

if __name__ == "__main__":
    os.environ.setdefault("VLLM_SIM_VLLM_VERSION", "0.26")
    os.environ.setdefault("VLLM_SIM_MODEL_MAX_LEN", "4096")  # the tiny model's max_position_embeddings
    sys.exit(main(sys.argv[1:]))
