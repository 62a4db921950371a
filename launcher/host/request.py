"""What the host checks read of a launch, and nothing more: the GPUs it will use (argv, env, args),
its address, its model path, its fingerprint and its `[preflight]` table.

Built from a plan (`launch preflight`, a probe's arms) or from what a candidate carries (the
supervisor's hooks: a last-good record has no profile file to plan from), so neither has to pose
as the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launcher.profile.candidate import Candidate
from launcher.profile.plan import LaunchPlan


@dataclass(frozen=True, slots=True)
class HostRequest:
    profile: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    args: Mapping[str, Any]  # the profile's `[args]`, as written (snake or kebab case)
    host: str
    port: int
    model: str | None  # vLLM's MODEL: a path is checked, a hub name is not
    fingerprint: str
    has_secret_env: bool  # an API key reaches vLLM (the compile cache must not be readable by others)
    preflight: Mapping[str, Any]  # the profile's `[preflight]` table

    @classmethod
    def from_plan(cls, plan: LaunchPlan) -> HostRequest:
        return cls.of_launch(
            plan.name,
            plan.argv,
            plan.env,
            plan.profile.data,
            host=plan.host,
            port=plan.port,
            fingerprint=plan.fingerprint(),
            has_secret_env=bool(plan.rendered.secret_env),
        )

    @classmethod
    def of_launch(
        cls,
        profile: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        profile_data: Mapping[str, Any],
        *,
        host: str,
        port: int,
        fingerprint: str,
        has_secret_env: bool,
    ) -> HostRequest:
        """From what every launch carries: its argv and env, and the resolved profile's tables."""
        engine = _table(profile_data.get("engine"))
        return cls(
            profile=profile,
            argv=tuple(argv),
            env=dict(env),
            args=_table(profile_data.get("args")),
            host=host,
            port=port,
            model=str(engine.get("model") or "") or None,
            fingerprint=fingerprint,
            has_secret_env=has_secret_env,
            preflight=_table(profile_data.get("preflight")),
        )

    @classmethod
    def of_candidate(cls, candidate: Candidate) -> HostRequest:
        """What the host checks read of a candidate: all of it is in the candidate (a last-good record
        has no profile file to plan from)."""
        return cls.of_launch(
            candidate.profile,
            candidate.argv,
            candidate.env,
            candidate.profile_data,
            host=candidate.host,
            port=candidate.port,
            fingerprint=candidate.fingerprint,
            has_secret_env=bool(candidate.secret_env),
        )


def _table(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}
