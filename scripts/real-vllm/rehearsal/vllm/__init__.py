"""A stand-in for vLLM, for rehearsing check-release.sh without a GPU: only its CLI module exists.

Never installed, never imported by the launcher or the tests: check-release.sh puts this folder on
PYTHONPATH when VLLM_GATE_REHEARSAL=1. The launcher's schema loader then finds no real parser here and
uses the committed snapshot, as on any machine without vLLM.
"""
