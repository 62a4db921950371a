"""`python -m vllm_sim serve MODEL ...`: the `vllm-sim` console script without the script on PATH."""

import sys

from vllm_sim.cli import main

sys.exit(main())
