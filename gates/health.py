"""health: `/health` answers 200, then `/v1/models` lists the profile's served model name.

Connection refused is "not yet" (vLLM listens only once ready); big models load for 20+ minutes,
so the default deadline is long.
"""

from __future__ import annotations

from typing import ClassVar

from basis.setting import Setting
from gates.base import GateBase, Need
from gates.context import GateContext
from gates.outcome import Outcome


class HealthGate(GateBase):
    name = "health"
    NEEDS: ClassVar[frozenset[Need]] = frozenset({Need.HTTP})
    DEFAULT_TIMEOUT_S = 1800.0
    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "request_timeout_s",
            (int, float),
            5.0,
            "Timeout of each HTTP request.",
            unit="s",
            minimum=0.1,
            maximum=600,
        ),
    )

    def check(self, ctx: GateContext) -> Outcome:
        timeout = float(self.setting("request_timeout_s"))
        health = ctx.http.get("/health", timeout)
        if not health.connected:
            return Outcome.not_yet(f"/health: no answer yet ({health.error})")
        if health.status != 200:
            return Outcome.not_yet(f"/health answered {health.status}", body=health.body[:500])
        models = ctx.http.get("/v1/models", timeout)
        if models.status != 200:
            return Outcome.failed(f"/v1/models answered {models.status}", body=models.body[:500])
        try:
            served = [card["id"] for card in models.json()["data"]]
        except (ValueError, KeyError, TypeError) as err:
            return Outcome.failed(f"/v1/models body is not a model list ({err})", body=models.body[:500])
        wanted = list(ctx.expect.served_model_names)
        missing = [name for name in wanted if name not in served]
        if missing:
            return Outcome.failed(
                f"server serves {served}, profile expects {wanted}", served=served, expected=wanted
            )
        return Outcome.passed(f"/health 200; serving {', '.join(served)}", served=served)
