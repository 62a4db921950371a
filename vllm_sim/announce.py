"""The API server's own log lines: config, going live, engine death, stop (vllm-facts.md §2, §5, §10)."""

from __future__ import annotations

import os

from vllm_flags.schema import VllmSchema
from vllm_sim import notes
from vllm_sim.config import SimConfig
from vllm_sim.config_text_026 import shown_args_026
from vllm_sim.cudagraph import GraphMode
from vllm_sim.logline import LogWriter
from vllm_sim.tracebacks import (
    API_CONFIG_026,
    API_FRAMES,
    API_SETUP_026,
    API_STARTUP_026,
    OUTPUT_HANDLER_026,
    Frame,
    traceback_text,
)
from vllm_sim.versions import Dialect

ARCHITECTURES = (
    ("qwen3", "Qwen3ForCausalLM"),
    ("qwen2", "Qwen2ForCausalLM"),
    ("llama", "LlamaForCausalLM"),
    ("mistral", "MistralForCausalLM"),
    ("gemma", "Gemma3ForCausalLM"),
    ("deepseek", "DeepseekV3ForCausalLM"),
    ("glm", "Glm4MoeForCausalLM"),
)
ENV_OURS = ("VLLM_SIM_",)
# vLLM's logo, `{v}` for the version (0.33 logs only the version line, LOGO[1]).
LOGO = (
    "       █     █     █▄   ▄█",
    " ▄▄ ▄█ █     █     █ ▀▄▀ █  version {v}",
    "  █▄█▀ █     █     █     █  ",
    "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
)


def architecture(model: str) -> str:
    low = model.lower()
    return next((arch for key, arch in ARCHITECTURES if key in low), "Qwen3ForCausalLM")


def logo(version: str, model: str) -> str:
    """The banner as 0.26.0 logs it: one record, so every line carries the prefix (real log)."""
    return "\n".join(("", *LOGO[:2], f"{LOGO[2]}model   {model}", LOGO[3], "")).replace("{v}", version)


def banner_lines(log: LogWriter, cfg: SimConfig, d: Dialect) -> bool:
    """The banner and `non-default args:`; False when 0.26.0's setup_server then refuses an unknown
    tool-call parser (entrypoints/openai/api_server.py:616-628)."""
    if os.environ.get("VLLM_DISABLE_LOG_LOGO") == "1":
        log.info(d.src("version"), d.version_line(cfg.model))
    elif d.logo_block:
        log.info(d.src("version"), logo(d.version, cfg.model))
    else:
        log.info(d.src("version"), LOGO[1].replace("{v}", d.version))
    shown = shown_args_026(cfg.shown_args) if d.notes else cfg.shown_args
    log.info(d.src("args"), f"non-default args: {shown}")
    if cfg.refusal is not None and cfg.refusal[0] == "tool call":
        refused(log, [cfg.refusal[1]], API_SETUP_026)
        return False
    return True


def config_lines(log: LogWriter, cfg: SimConfig, d: Dialect, schema: VllmSchema) -> bool:
    """What the API process logs while it resolves the config, before it starts the engine; False
    when 0.26.0 refuses there (an unknown reasoning parser, record/reasoning)."""
    if d.notes:
        notes.ulimit_warning(log, d)
    _unknown_env_lines(log, d, schema)
    log.info(d.src("arch"), f"Resolved architecture: {architecture(cfg.model)}")
    log.info(d.src("max_len"), f"Using max model len {cfg.max_model_len}")
    log.info(
        d.src("chunked"),
        f"Chunked prefill is enabled with max_num_batched_tokens={cfg.max_num_batched_tokens}.",
    )
    if d.notes:
        notes.scheduling(log, cfg, d, api=True)
        notes.runner_fallback(log, cfg, d)
    if cfg.refusal is not None:  # 0.26.0: the reasoning parser is looked up while the config is built
        refused(log, [cfg.refusal[1]], API_CONFIG_026)
        return False
    for warning in cfg.graphs.warnings:
        log.warning(d.src("sizes_overridden"), warning)
    _eager_lines(log, cfg, d)
    return True


def _unknown_env_lines(log: LogWriter, d: Dialect, schema: VllmSchema) -> None:
    """vLLM warns of each VLLM_* variable it does not know (ours, VLLM_SIM_*, aside)."""
    if schema.env_vars:
        for name in sorted(os.environ):
            if name.startswith("VLLM_") and name not in schema.env_vars and not name.startswith(ENV_OURS):
                log.warning(d.src("unknown_env"), f"Unknown vLLM environment variable detected: {name}")


def _eager_lines(log: LogWriter, cfg: SimConfig, d: Dialect) -> None:
    """Eager asked for, or forced by `--sim-eager-fallback`: what vLLM says as it turns graphs off."""
    if cfg.enforce_eager and not d.notes:  # 0.26's eager lines: notes.scheduling
        log.info(
            d.src("eager_note"),
            "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. "
            "This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none and "
            "--kernel_config.enable_jit_warmup=False",
        )
        log.info(d.src("eager_off"), "Cudagraph is disabled under eager mode")
    elif cfg.faults.eager_fallback and cfg.graphs.mode == GraphMode.NONE:
        log.info(
            d.src("cg_mode_override"),
            "Cudagraph mode FULL_AND_PIECEWISE is not compatible with compilation mode 0. Overriding to "
            "NONE.",
        )


def ready_lines(
    log: LogWriter, cfg: SimConfig, d: Dialect, url: str, routes: tuple[tuple[str, str], ...]
) -> None:
    log.info(d.src("tasks"), "Supported tasks: ['generate']")
    if cfg.dev_mode:  # build_app registers the dev routers (0.26.0 entrypoints/serve/__init__.py:35-40)
        log.warning(
            d.src("dev_mode"),
            "SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!",
        )
    if cfg.auto_tools:
        log.info(d.src("auto_tools"), '"auto" tool choice has been enabled.')
    if d.notes:
        log.info(
            d.src("chat_format"),
            "Detected the chat template content format to be 'string'. You can set "
            "`--chat-template-content-format` to override this.",
        )
    log.info(d.src("server_start"), d.server_start_line(url))
    log.info(d.src("routes"), "Available routes are:")
    for path, methods in routes:
        log.info(d.src("route"), f"Route: {path}, Methods: {methods}")


def uvicorn_started(log: LogWriter) -> None:
    log.raw(f"INFO:     Started server process [{os.getpid()}]")
    log.raw("INFO:     Waiting for application startup.")


def uvicorn_stopped(log: LogWriter, d: Dialect, engine_died: bool = False) -> None:
    log.raw("INFO:     Shutting down")
    log.raw("INFO:     Waiting for application shutdown.")
    log.raw("INFO:     Application shutdown complete.")
    # 0.26.0 ends a SIGTERM without it (tiny.log), a dead engine's shutdown with it (record/eager)
    if d.uvicorn_finished or engine_died:
        log.raw(f"INFO:     Finished server process [{os.getpid()}]")


def engine_died(log: LogWriter, d: Dialect) -> None:
    """The API server noticing its engine is gone (0.26.0: the MPClient's cleanup, then the output
    handler's EngineDeadError with its traceback, as record/eager logged a SIGKILLed engine)."""
    log.warning(
        d.src("core_exited"), "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup"
    )
    dead = (
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause."
    )
    if not d.real_frames:
        log.error(d.src("output_handler"), "AsyncLLM output_handler failed.")
        log.error(d.src("output_handler"), dead)
        return
    log.info(d.src("sd_mp_start"), "[shutdown] MPClient: start timeout=default")
    log.info(d.src("sd_mp_stopping"), "[shutdown] MPClient: stopping engine manager")
    log.info(d.src("sd_mp_stopped"), "[shutdown] MPClient: engine manager stopped")
    log.info(d.src("sd_mp_cleanup"), "[shutdown] MPClient: cleaning up background resources")
    log.info(d.src("sd_mp_done"), "[shutdown] MPClient: complete")
    log.error(
        d.src("output_handler"),
        "AsyncLLM output_handler failed.\n" + traceback_text(OUTPUT_HANDLER_026, dead),
    )


def startup_failed(log: LogWriter, d: Dialect) -> None:
    last = (
        f"RuntimeError: Engine core initialization failed. See root cause above. "
        f"Failed core proc(s): {d.failed_procs()}"
    )
    frames = API_STARTUP_026 if d.real_frames else API_FRAMES
    for line in traceback_text(frames, last).split("\n"):
        log.raw(line)


def refused(log: LogWriter, lines: list[str], frames: tuple[Frame, ...] = API_FRAMES[:3]) -> None:
    """A configuration vLLM rejects before the engine starts: a traceback on stderr."""
    text = traceback_text(frames, lines[0])
    for line in text.split("\n") + lines[1:]:
        log.raw(line)
