"""A candidate: exactly what one start runs and how it is judged — from a profile's plan, or from
the last-good record (which must start the promoted launch, not whatever the profile says now)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gates.context import Expectations
from gates.registry import DEFAULT_ORDER
from launcher.errors import BadInput
from launcher.profile.keys import SupervisorSettings, engine_settings
from launcher.profile.plan import LaunchPlan
from launcher.profile.semantics import capture_config, human_int
from vllm_flags.cudagraph_sizes import configured_capture_sizes, expected_capture_sizes

PRIVATE_ENV = frozenset({"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"})


@dataclass(frozen=True, slots=True)
class Candidate:
    profile: str
    label: str  # "candidate prod@1a2b…" or "last-good prod@…"
    argv: tuple[str, ...]
    env: dict[str, str]
    secret_env: dict[str, str]
    host: str
    port: int
    fingerprint: str
    expect: Expectations
    gate_order: tuple[str, ...]
    gate_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    supervisor: dict[str, Any] = field(default_factory=dict)
    profile_data: dict[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> SupervisorSettings:
        """`[supervisor]` with its declared defaults: the one way its values are read."""
        return SupervisorSettings.read(self.supervisor)

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    def process_env(self) -> dict[str, str]:
        """The environment vLLM starts with: ours, the profile's, and the API key copied by name.

        systemd's notify and watchdog variables are the launcher's alone (vLLM must not answer
        them); VLLM_GATE_PROFILE marks vLLM's processes as ours, so a dead launcher's are
        recognised as orphans."""
        inherited = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        env = {**inherited, "PYTHONUNBUFFERED": "1", **self.env, "VLLM_GATE_PROFILE": self.profile}
        for target, source in self.secret_env.items():
            if not os.environ.get(source, "").strip():  # an empty VLLM_API_KEY is no key to vLLM
                raise BadInput(
                    f"engine.api_key_env names ${source}, which is not set (or is empty)",
                    hint=f"export {source}=…",
                )
            env[target] = os.environ[source]
        return env

    def api_key(self) -> str | None:
        source = self.secret_env.get("VLLM_API_KEY")
        return os.environ.get(source) if source else None

    @property
    def home_port(self) -> int:
        """The profile's `engine.port`: where a cold start serves (a parked change alternates, below)."""
        if not isinstance(self.profile_data.get("engine"), dict):
            return self.port  # a record from before profile data was kept
        return engine_settings(self.profile_data).integer("port")

    def at_port(self, port: int) -> Candidate:
        """The same launch on another port (`park = "sleep"`: the sleeper keeps its own). The
        fingerprint stays the profile's: which port serves is no change of the launch."""
        argv = list(self.argv)
        for index, token in enumerate(argv[:-1]):
            if token == "--port":
                argv[index + 1] = str(port)
        return replace(self, argv=tuple(argv), port=port)

    def same_launch(self, other: Candidate) -> bool:
        """Same argv and env (the fingerprint) and judged the same way: restarting would change nothing."""
        return (self.fingerprint, self.gate_order, self.gate_tables, self.supervisor) == (
            other.fingerprint,
            other.gate_order,
            other.gate_tables,
            other.supervisor,
        )

    def to_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["expect"] = asdict(self.expect)
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Candidate:
        expect = dict(record["expect"])
        expect["served_model_names"] = tuple(expect["served_model_names"])
        for key in ("capture_sizes", "configured_sizes"):
            if expect.get(key) is not None:
                expect[key] = tuple(expect[key])
        return cls(
            profile=record["profile"],
            label=f"last-good {record['profile']}@{record['fingerprint']}",
            argv=tuple(record["argv"]),
            env=dict(record["env"]),
            secret_env=dict(record.get("secret_env", {})),
            host=record["host"],
            port=int(record["port"]),
            fingerprint=record["fingerprint"],
            expect=Expectations(**expect),
            gate_order=tuple(record["gate_order"]),
            gate_tables=dict(record.get("gate_tables", {})),
            supervisor=dict(record.get("supervisor", {})),
            profile_data=dict(record.get("profile_data", {})),
        )

    @classmethod
    def from_plan(cls, plan: LaunchPlan) -> Candidate:
        gates = plan.profile.data.get("gates", {})
        order = gates.get("order") if isinstance(gates, dict) else None
        tables = {k: dict(v) for k, v in (gates or {}).items() if isinstance(v, dict)}
        supervisor = plan.profile.data.get("supervisor", {})
        return cls(
            profile=plan.name,
            label=f"candidate {plan.name}@{plan.fingerprint()}",
            argv=plan.argv,
            env=dict(plan.env),
            secret_env=dict(plan.rendered.secret_env),
            host=plan.host,
            port=plan.port,
            fingerprint=plan.fingerprint(),
            expect=expectations(plan),
            gate_order=tuple(order) if isinstance(order, list) else DEFAULT_ORDER,
            gate_tables=tables,
            supervisor=dict(supervisor) if isinstance(supervisor, dict) else {},
            profile_data=plan.profile.data,
        )


def expectations(plan: LaunchPlan) -> Expectations:
    """What the gates should see, computed from the profile the way vLLM filters it."""
    config = capture_config(plan.args, plan.env)
    sizes = expected_capture_sizes(config)
    configured = configured_capture_sizes(config)
    compilation = plan.args.get("compilation_config")
    mode = compilation.get("cudagraph_mode") if isinstance(compilation, dict) else None
    return Expectations(
        served_model_names=tuple(plan.served_model_names),
        capture_sizes=tuple(sizes) if sizes is not None else None,
        configured_sizes=tuple(configured) if configured is not None else None,
        enforce_eager=config.enforce_eager,
        cudagraph_mode=str(mode).upper() if mode else None,
        max_num_seqs=config.max_num_seqs,
        decode_query_len=config.decode_query_len,
        max_model_len=human_int(plan.args.get("max_model_len")),
        model_runner=config.model_runner,
    )
