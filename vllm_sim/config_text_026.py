"""vLLM 0.26.0's two configuration lines, field for field as the real run printed them.

`Initializing a V1 LLM engine (v0.26.0) with config: ...` (the engine's resolved config) and the
`--compilation-config` entry of `non-default args:` (the whole CompilationConfig the flag parsed,
unset fields included). Source: tests/data/real-vllm-0.26/tiny.log and tiny-ngram.log.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from vllm_sim.config import SimConfig
from vllm_sim.versions import Dialect

SPLITTING_OPS = (
    "unified_attention_with_output",
    "unified_mla_attention_with_output",
    "mamba_mixer2",
    "mamba_mixer",
    "short_conv",
    "linear_attention",
    "plamo2_mamba_mixer",
    "qwen_gdn_attention_core",
    "gdn_attention_core_xpu",
    "olmo_hybrid_gdn_full_forward",
    "kda_attention",
    "sparse_attn_indexer",
    "rocm_aiter_sparse_attn_indexer",
    "deepseek_v4_attention",
    "hpc_rope_norm_forward",
    "unified_kv_cache_update",
    "unified_mla_kv_cache_update",
)
PASSES = (
    "fuse_norm_quant",
    "fuse_act_quant",
    "fuse_attn_quant",
    "enable_sp",
    "fuse_gemm_comms",
    "fuse_allreduce_rms",
    "enable_qk_norm_rope_fusion",
    "fuse_rope_kvcache_cat_mla",
    "fuse_act_padding",
    "fuse_qk_norm_rope_kvcache",
)
INDUCTOR = (
    "{'enable_auto_functionalized_v2': False, 'size_asserts': False, 'alignment_asserts': False, "
    "'scalar_asserts': False, 'combo_kernels': True, 'benchmark_combo_kernel': True}"
)
DYNAMIC = (
    "{'type': <DynamicShapesType.BACKED: 'backed'>, 'evaluate_guards': False, "
    "'assume_32_bit_indexing': False}"
)
STRUCTURED = (
    "StructuredOutputsConfig(backend='auto', disable_any_whitespace=False, "
    "disable_additional_properties=False, reasoning_parser='', reasoning_parser_plugin='', "
    "enable_in_reasoning=False)"
)
OBSERVABILITY = (
    "ObservabilityConfig(show_hidden_metrics_for_version=None, otlp_traces_endpoint=None, "
    "collect_detailed_traces=None, kv_cache_metrics=False, kv_cache_metrics_sample=0.01, "
    "cudagraph_metrics=False, enable_layerwise_nvtx_tracing=False, enable_mfu_metrics=False, "
    "enable_mm_processor_stats=False, enable_logging_iteration_details=False, jit_monitor_mode='warn', "
    "jit_monitor_verbose=False)"
)
KERNEL = (
    "KernelConfig(ir_op_priority=IrOpPriorityConfig(rms_norm=['native'], fused_add_rms_norm=['native']), "
    "enable_flashinfer_autotune=True, enable_cutedsl_warmup=True, enable_bf16x3_router_gemm=False, "
    "moe_backend='auto', linear_backend='auto')"
)
KERNEL_EAGER = KERNEL.replace("['native']", "['vllm_c', 'native']")  # record/eager, as notes.IR_OP_EAGER


def compilation_repr(cfg: SimConfig) -> str:
    """The engine config's `compilation_config={...}` (sizes as configured, before the runner rounds)."""
    plan = cfg.graphs
    compiled = plan.compile_mode == 3
    mode = "<CompilationMode.VLLM_COMPILE: 3>" if compiled else "<CompilationMode.NONE: 0>"
    ops = ", ".join(f"'vllm::{op}'" for op in SPLITTING_OPS) if compiled else ""
    # Eager turns on the custom ops, so the norm and activation fusions (record/eager, `Enabled custom
    # fusions: norm_quant, act_quant`); the backend stays inductor (0.26.0 config/compilation.py:1050),
    # the custom ops follow the mode (config/vllm.py:1245-1258), and eager keeps 0 warm-ups (:1390).
    fused = ("fuse_norm_quant", "fuse_act_quant") if cfg.enforce_eager else ()
    passes = ", ".join(f"'{name}': {name in fused}" for name in PASSES)
    sizes = ", ".join(str(s) for s in plan.sizes)
    fields = [
        f"'mode': {mode}",
        "'debug_dump_path': None",
        "'cache_dir': ''",
        "'compile_cache_save_format': 'binary'",
        "'backend': 'inductor'",
        f"'custom_ops': [{'none' if compiled else 'all'!r}]",
        f"'ir_enable_torch_wrap': {compiled}",
        f"'splitting_ops': [{ops}]",
        "'compile_mm_encoder': False",
        "'cudagraph_mm_encoder': False",
        "'encoder_cudagraph_token_budgets': []",
        "'encoder_cudagraph_max_vision_items_per_batch': 0",
        "'encoder_cudagraph_max_frames_per_batch': None",
        "'compile_sizes': []",
        f"'compile_ranges_endpoints': [{cfg.max_num_batched_tokens}]",
        f"'inductor_compile_config': {INDUCTOR}",
        "'inductor_passes': {}",
        f"'cudagraph_mode': <CUDAGraphMode.{plan.mode.value}: {plan.mode.enum_value}>",
        f"'cudagraph_num_of_warmups': {0 if cfg.enforce_eager else 1}",
        f"'cudagraph_capture_sizes': [{sizes}]",
        "'cudagraph_copy_inputs': False",
        "'cudagraph_specialize_lora': True",
        "'use_inductor_graph_partition': False",
        f"'pass_config': {{{passes}}}",
        f"'max_cudagraph_capture_size': {plan.max_size}",
        f"'dynamic_shapes_config': {DYNAMIC}",
        "'local_cache_dir': None",
        "'fast_moe_cold_start': False",
        "'static_all_moe_layers': []",
    ]
    return "{" + ", ".join(fields) + "}"


def engine_config_line_026(cfg: SimConfig, dialect: Dialect) -> str:
    spec = "None"
    if cfg.spec_method:
        drafter = "None" if cfg.spec_method.startswith("ngram") else repr(cfg.model)
        tokens = cfg.spec_tokens
        spec = f"SpeculativeConfig(method='{cfg.spec_method}', model={drafter}, num_spec_tokens={tokens})"
    fields = [
        f"model={cfg.model!r}",
        f"speculative_config={spec}",
        f"tokenizer={cfg.model!r}",
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None",
        "trust_remote_code=False, dtype=torch.bfloat16",
        f"max_seq_len={cfg.max_model_len}",
        "download_dir=None, load_format=auto",
        f"tensor_parallel_size={cfg.tp}",
        "pipeline_parallel_size=1, data_parallel_size=1, decode_context_parallel_size=1",
        "dcp_comm_backend=ag_rs",
        "disable_custom_all_reduce=False, quantization=None, quantization_config=None",
        f"enforce_eager={cfg.enforce_eager}",
        "enable_return_routed_experts=False",
        f"kv_cache_dtype={cfg.kv_cache_dtype}",
        "device_config=cuda",
        f"structured_outputs_config={STRUCTURED}",
        f"observability_config={OBSERVABILITY}",
        "seed=0",
        f"served_model_name={cfg.served_names[0]}",
        f"enable_prefix_caching={cfg.prefix_caching}",
        "enable_chunked_prefill=True, pooler_config=None",
        f"compilation_config={compilation_repr(cfg)}",
        f"kernel_config={KERNEL_EAGER if cfg.enforce_eager else KERNEL}",
    ]
    return f"Initializing a V1 LLM engine (v{dialect.version}) with config: " + ", ".join(fields)


class _Shown(str):
    """A value `non-default args:` prints as is (an enum repr), not quoted."""

    def __repr__(self) -> str:
        return str(self)


COMPILATION_ARGS: dict[str, Any] = {
    "mode": None,
    "debug_dump_path": None,
    "cache_dir": "",
    "compile_cache_save_format": "binary",
    "backend": "inductor",
    "custom_ops": [],
    "ir_enable_torch_wrap": None,
    "splitting_ops": None,
    "compile_mm_encoder": False,
    "cudagraph_mm_encoder": False,
    "encoder_cudagraph_token_budgets": [],
    "encoder_cudagraph_max_vision_items_per_batch": 0,
    "encoder_cudagraph_max_frames_per_batch": None,
    "compile_sizes": None,
    "compile_ranges_endpoints": None,
    "inductor_compile_config": {
        "enable_auto_functionalized_v2": False,
        "size_asserts": False,
        "alignment_asserts": False,
        "scalar_asserts": False,
        "combo_kernels": True,
        "benchmark_combo_kernel": True,
    },
    "inductor_passes": {},
    "cudagraph_mode": None,
    "cudagraph_num_of_warmups": 0,
    "cudagraph_capture_sizes": None,
    "cudagraph_copy_inputs": False,
    "cudagraph_specialize_lora": True,
    "use_inductor_graph_partition": None,
    "pass_config": {},
    "max_cudagraph_capture_size": None,
    "dynamic_shapes_config": {
        "type": _Shown("<DynamicShapesType.BACKED: 'backed'>"),
        "evaluate_guards": False,
        "assume_32_bit_indexing": False,
    },
    "local_cache_dir": None,
    "fast_moe_cold_start": None,
    "static_all_moe_layers": [],
}


def shown_args_026(shown: dict[str, Any]) -> dict[str, Any]:
    """`non-default args:` as 0.26.0 prints it: JSON flags parsed, the compilation config in full."""
    out: dict[str, Any] = {}
    for key, value in shown.items():
        if isinstance(value, str) and value.lstrip().startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if key == "compilation_config" and isinstance(value, dict):
            value = {**COMPILATION_ARGS, **value}
        out[key] = value
    return out
