"""The one long `Initializing a V1 LLM engine (v…) with config: …` line (vllm-facts.md §2 #4, §3)."""

from __future__ import annotations

from vllm_sim.config import SimConfig
from vllm_sim.versions import Dialect


def compilation_repr(cfg: SimConfig) -> str:
    """The compilation_config dict repr: enums print as `<Enum.NAME: value>` (pydantic dump)."""
    plan = cfg.graphs
    mode = "<CompilationMode.VLLM_COMPILE: 3>" if plan.compile_mode == 3 else "<CompilationMode.NONE: 0>"
    sizes = ", ".join(str(s) for s in plan.sizes)
    backend = "'inductor'" if plan.compile_mode == 3 else "''"
    return (
        f"{{'level': None, 'mode': {mode}, 'debug_dump_path': None, 'cache_dir': '', 'backend': {backend}, "
        f"'custom_ops': ['none'], 'splitting_ops': [], 'use_inductor_graph_partition': False, "
        f"'cudagraph_mode': <CUDAGraphMode.{plan.mode.value}: {plan.mode.enum_value}>, "
        f"'cudagraph_num_of_warmups': 1, 'cudagraph_capture_sizes': [{sizes}], "
        f"'cudagraph_copy_inputs': False, 'max_cudagraph_capture_size': {plan.max_size}, "
        f"'local_cache_dir': None}}"
    )


def spec_repr(cfg: SimConfig) -> str:
    if not cfg.spec_method:
        return "None"
    method, model, tokens = cfg.spec_method, cfg.model, cfg.spec_tokens
    return f"SpeculativeConfig(method='{method}', model={model!r}, num_spec_tokens={tokens})"


def engine_config_line(cfg: SimConfig, dialect: Dialect) -> str:
    if dialect.notes:
        from vllm_sim.config_text_026 import engine_config_line_026

        return engine_config_line_026(cfg, dialect)
    served = cfg.served_names[0]
    kv_dtype = cfg.kv_cache_dtype
    return (
        f"Initializing a V1 LLM engine (v{dialect.version}) with config: model={cfg.model!r}, "
        f"speculative_config={spec_repr(cfg)}, tokenizer={cfg.model!r}, skip_tokenizer_init=False, "
        "tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, "
        f"dtype=torch.bfloat16, max_seq_len={cfg.max_model_len}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={cfg.tp}, pipeline_parallel_size=1, data_parallel_size=1, "
        "disable_custom_all_reduce=False, quantization=None, "
        f"enforce_eager={cfg.enforce_eager}, kv_cache_dtype={kv_dtype}, device_config=cuda, "
        "structured_outputs_config=StructuredOutputsConfig(backend='auto'), observability_config="
        f"ObservabilityConfig(collect_detailed_traces=None), seed=0, served_model_name={served}, "
        f"enable_prefix_caching={cfg.prefix_caching}, enable_chunked_prefill=True, pooler_config=None, "
        f"compilation_config={compilation_repr(cfg)}, kernel_config=KernelConfig("
        f"enable_jit_warmup={not cfg.enforce_eager})"
    )
