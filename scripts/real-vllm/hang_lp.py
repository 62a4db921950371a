"""A soft hang for issue 42 (check-i42.sh): a vLLM logits processor that blocks the engine core's
busy loop in its `apply` while a flag file exists, polling it with short sleeps, so the process
stays in state S (sleeping), never T as under SIGSTOP. Without the flag it returns the logits
untouched after one stat() of the flag's path, so an engine that loads it serves as before.

The flag's path is $HANG_LP_FLAG (the profile's [env]; default below). Loaded with
`--logits-processors hang_lp:HangLogitsProcessor`, this folder on vLLM's PYTHONPATH (tiny-hang.toml).

What this relies on, read in the vLLM 0.26.0 wheel's own source:
- vllm/v1/sample/logits_processor/interface.py:60-106: the abstract base `LogitsProcessor` with
  `__init__(self, vllm_config, device, is_pin_memory)`, `apply(self, logits) -> Tensor`,
  `is_argmax_invariant(self) -> bool`, `update_state(self, batch_update: BatchUpdate | None)`, and
  the classmethod `validate_params(sampling_params)` (a default that accepts everything).
- vllm/v1/sample/logits_processor/__init__.py:86-155 (`_load_logitsprocs_by_fqcns`): each entry of
  `--logits-processors` (engine/arg_utils.py:885, ModelConfig.logits_processors, config/model.py:332,
  nargs "+") is `module:Class`, imported with importlib.import_module and refused unless a subclass
  of `LogitsProcessor`; `build_logitsprocs` (:184) instantiates it in the engine core's model
  runner (v1/worker/gpu_model_runner.py:689-725); the API server imports it too, to validate each
  request's params (sampling_params.py:837-842).
- vllm/v1/sample/sampler.py:371-400: processors whose `is_argmax_invariant()` is False are applied
  to every batch before sampling, greedy ones too (the watch's canary is greedy); argmax-invariant
  ones only to random sampling (:282). Hence False here.
- vllm/config/vllm.py:2127-2202: the V2 model runner lists "custom logits processors" among what it
  does not support: without VLLM_USE_V2_MODEL_RUNNER vLLM falls back to V1 with the warning `Model
  Runner V2 does not yet support custom logits processors; using the V1 model runner instead.`
  (:585); with VLLM_USE_V2_MODEL_RUNNER=1 it refuses to start (`_validate_v2_model_runner`, :1456).
  tiny-hang.toml sets VLLM_USE_V2_MODEL_RUNNER=0. Custom processors are also refused with
  speculative decoding (logits_processor/__init__.py, STR_SPEC_DEC_REJECTS_LOGITSPROCS).
"""

from __future__ import annotations

import os
import time

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

FLAG = os.environ.get("HANG_LP_FLAG", "/tmp/check-i42/hang.flag")
POLL_S = 0.05


def wait_while_flagged(flag: str = FLAG, poll_s: float = POLL_S) -> float:
    """Block while `flag` exists; the seconds blocked (0.0 after one stat() when it is absent)."""
    if not os.path.exists(flag):
        return 0.0
    started = time.monotonic()
    while os.path.exists(flag):
        time.sleep(poll_s)
    return time.monotonic() - started


class HangLogitsProcessor(LogitsProcessor):
    def __init__(self, vllm_config: object, device: torch.device, is_pin_memory: bool) -> None:
        self.blocked_s = 0.0

    def is_argmax_invariant(self) -> bool:
        return False  # applied to greedy batches too (sampler.py:399)

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        return None  # no per-request state

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        self.blocked_s += wait_while_flagged()
        return logits
