"""What preflight found: one result per check (ok / refused / skipped, each with its reason)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from launcher.errors import PreflightRefused
from launcher.host.reaper import ReapReport


class CheckName(StrEnum):
    GPU_MEMORY = "gpu_memory"
    ORPHANS = "orphans"
    ONE_MODEL = "one_model_per_gpu"
    HOST_MEMORY = "host_memory"
    SWAP = "swap"
    PORT = "port"
    MODEL_PATH = "model_path"
    RESTART_GUARD = "restart_guard"
    COMPILE_CACHE = "compile_cache"


class CheckStatus(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    SKIPPED = "skipped"
    WARNING = "warning"  # does not stop the start; says what the operator may want to look at


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: CheckName
    status: CheckStatus
    detail: str
    hint: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": str(self.name),
            "status": str(self.status),
            "detail": self.detail,
            "hint": self.hint,
            **self.data,
        }


def ok(name: CheckName, detail: str, **data: Any) -> CheckResult:
    return CheckResult(name, CheckStatus.OK, detail, data=data)


def refused(name: CheckName, detail: str, hint: str | None = None, **data: Any) -> CheckResult:
    return CheckResult(name, CheckStatus.REFUSED, detail, hint, data=data)


def warned(name: CheckName, detail: str, hint: str | None = None, **data: Any) -> CheckResult:
    return CheckResult(name, CheckStatus.WARNING, detail, hint, data=data)


def skipped(name: CheckName, reason: str, **data: Any) -> CheckResult:
    return CheckResult(name, CheckStatus.SKIPPED, reason, data=data)


@dataclass(frozen=True, slots=True)
class PreflightReport:
    profile: str
    checks: tuple[CheckResult, ...]
    gpus: tuple[str, ...]
    gpu_source: str
    reap: ReapReport | None = None

    @property
    def refused(self) -> bool:
        return any(c.status is CheckStatus.REFUSED for c in self.checks)

    def check(self, name: CheckName) -> CheckResult:
        return next(c for c in self.checks if c.name is name)

    def reason(self) -> str:
        """The one paragraph an operator reads: every refusal, in check order."""
        parts = [c.detail for c in self.checks if c.status is CheckStatus.REFUSED]
        return f"preflight refused to start profile {self.profile!r}: " + " | ".join(parts)

    def warnings(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if c.status is CheckStatus.WARNING]

    def hint(self) -> str | None:
        hints = list(dict.fromkeys(c.hint for c in self.checks if c.status is CheckStatus.REFUSED and c.hint))
        return "; ".join(hints) or None

    def raise_if_refused(self) -> None:
        if self.refused:
            raise PreflightRefused(self.reason(), hint=self.hint())

    def render_text(self) -> str:
        where = (
            f"GPUs {','.join(self.gpus)} ({self.gpu_source})" if self.gpus else self.gpu_source or "no GPU"
        )
        lines = [f"preflight: profile {self.profile!r}, {where}"]
        if self.reap is not None:
            lines += [f"  reaped   {r.describe()}" for r in self.reap.processes]
            if self.reap.gpu_released is not None:
                back = "back" if self.reap.gpu_released else "NOT back"
                lines.append(f"  reaped   GPU memory {back} after {self.reap.gpu_wait_s:.1f} s")
        width = max(len(c.name) for c in self.checks)
        lines += [f"  {c.status:<8} {c.name:<{width}}  {c.detail}" for c in self.checks]
        verdict = "REFUSED" if self.refused else "ok: every check passed or was skipped with its reason"
        lines.append(verdict)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        reap = None
        if self.reap is not None:
            reap = {
                "processes": [
                    {
                        "pid": r.pid,
                        "label": r.label,
                        "outcome": str(r.outcome),
                        "seconds": round(r.seconds, 3),
                    }
                    for r in self.reap.processes
                ],
                "gpu_released": self.reap.gpu_released,
                "gpu_wait_s": round(self.reap.gpu_wait_s, 3),
                "free_mib_before": {str(k): v >> 20 for k, v in self.reap.free_bytes_before.items()},
                "free_mib_after": {str(k): v >> 20 for k, v in self.reap.free_bytes_after.items()},
            }
        return {
            "profile": self.profile,
            "refused": self.refused,
            "reason": self.reason() if self.refused else None,
            "hint": self.hint() if self.refused else None,
            "gpus": list(self.gpus),
            "gpu_source": self.gpu_source,
            "checks": [c.to_json() for c in self.checks],
            "reaped": reap,
        }
