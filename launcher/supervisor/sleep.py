"""vLLM's sleep routes and the rules of parking (`[supervisor] park = "sleep"`, docs/park.md): when
an engine can sleep, where its candidate starts meanwhile, when it is asleep enough, when the
serving engine may be parked for a change or lent to `launch probe`, and the `on_switch` hook that
tells a proxy which port serves. Pure rules and one HTTP client; the supervisor half that parks,
wakes and lends is park.py.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from basis.clock import SYSTEM_CLOCK, Clock
from basis.setting import SettingValues
from gates.context import HttpClient
from launcher.host.adapters import RequestsHttp
from launcher.profile.candidate import Candidate
from launcher.profile.keys import PREFLIGHT, SupervisorSettings

GIB = 1 << 30
MIB = 1 << 20
SLEEP_FLAG = "--enable-sleep-mode"
DEV_MODE = "VLLM_SERVER_DEV_MODE"
RESIDUE_SHARE = 0.5  # asleep = its GPU memory fell below half of what it held awake …
RESIDUE_FLOOR = 4 * GIB  # … or under 4 GiB (measured: 0.9 GiB tiny, 1.6 GiB for 2.84 B params)
# The same server after a wake answers this the same way (vLLM's known faults: garbage after a wake,
# issues 16234 and 17103). Greedy, a few tokens, asked while the door holds every client's request,
# so the engine runs it alone: no batch to change the numerics.
GREEDY_PROMPT = "A list of the first ten prime numbers:"
GREEDY_TOKENS = 16
RESET_RETRY_S = 0.2
# What a park costs on vLLM 0.26.0 (vllm-facts.md §12; H200): an engine's first level-1 sleep pins
# host buffers for its weights, 2.7 s for 5.29 GiB (0.145 s of it the sleep itself); later sleeps
# 0.14-0.17 s, a wake 0.06-0.32 s. The dry run shows them, so an operator sees when stop is cheaper.
SLEEP_S = 0.15
PIN_S_PER_GIB = (2.7 - 0.145) / 5.29
WAKE_S = 0.3  # `success: false` while requests hold blocks: vLLM says callers may retry


def asleep_enough(awake_bytes: int, asleep_bytes: int) -> bool:
    """Level 1 keeps only the CUDA context and graph pool (0.9 GiB for the tiny model, 1.6 GiB for
    2.84 B parameters on the H200): under half of what it held awake, or under 4 GiB."""
    return asleep_bytes <= max(awake_bytes * RESIDUE_SHARE, RESIDUE_FLOOR)


class VllmSleep:
    """The real routes (vLLM 0.26.0 `entrypoints/serve/dev/sleep/api_router.py`, `dev/cache`):
    `/sleep` and `/wake_up` answer 200 with an empty body, `/is_sleeping` `{"is_sleeping": bool}`,
    `/reset_prefix_cache` `{"success": bool}` (false while blocks are still held: retried)."""

    def __init__(
        self, candidate: Candidate, clock: Clock = SYSTEM_CLOCK, http: HttpClient | None = None
    ) -> None:
        self.candidate = candidate
        self.http = http if http is not None else RequestsHttp(candidate.base_url, candidate.api_key())
        self.clock = clock

    def sleep(self, timeout_s: float) -> str | None:
        return self._post("/sleep?level=1", timeout_s)

    def wake(self, timeout_s: float) -> str | None:
        return self._post("/wake_up", timeout_s)

    def is_sleeping(self, timeout_s: float) -> bool | None:
        reply = self.http.get("/is_sleeping", timeout_s)
        try:
            value = reply.json().get("is_sleeping") if reply.status == 200 else None
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, bool) else None

    def reset_prefix_cache(self, timeout_s: float) -> str | None:
        """Retried until it succeeds or `timeout_s` passed: vLLM answers `success: false` while running
        requests still hold blocks, and its docstring says callers may retry (vllm-facts.md §12)."""
        deadline = self.clock.monotonic() + timeout_s
        while True:
            left = max(deadline - self.clock.monotonic(), 0.1)
            reply = self.http.post_json("/reset_prefix_cache", {}, left)
            try:
                if reply.status == 200 and json.loads(reply.body).get("success") is True:
                    return None
            except (ValueError, AttributeError):
                pass
            why = f"/reset_prefix_cache answered {reply.status or reply.error}: {reply.body[:200]}"
            if self.clock.monotonic() + RESET_RETRY_S >= deadline:
                return f"{why} (for {timeout_s:g} s)"
            self.clock.sleep(RESET_RETRY_S)

    def greedy(self, timeout_s: float) -> tuple[str | None, str | None]:
        names = self.candidate.expect.served_model_names
        body = {
            "model": names[0] if names else "",
            "prompt": GREEDY_PROMPT,
            "max_tokens": GREEDY_TOKENS,
            "temperature": 0,
        }
        reply = self.http.post_json("/v1/completions", body, timeout_s)
        if reply.status != 200:
            return None, f"the greedy prompt answered {reply.status or reply.error}: {reply.body[:200]}"
        try:
            text = json.loads(reply.body)["choices"][0]["text"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None, f"the greedy prompt's answer is no completion: {reply.body[:200]}"
        return (text, None) if isinstance(text, str) else (None, "the greedy prompt's answer has no text")

    def _post(self, path: str, timeout_s: float) -> str | None:
        reply = self.http.post_json(path, {}, timeout_s)
        if reply.status == 200:
            return None
        if reply.timed_out:
            return f"POST {path}: no answer within {timeout_s:g} s"
        return f"POST {path} answered {reply.status or reply.error}: {reply.body[:300]}".rstrip(": ")


def park_costs(settings: SupervisorSettings, facts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What parking costs this profile, from the last start's log facts (its weights, its start):
    the first sleep's pinning, later sleeps and a wake; None when it does not park."""
    if settings.park != "sleep":
        return None
    weights = facts.get("weights_gib") if facts else None
    start = facts.get("startup_seconds") if facts else None
    gib = float(weights) if isinstance(weights, int | float) and not isinstance(weights, bool) else None
    return {
        "weights_gib": gib,
        "first_sleep_s": None if gib is None else round(SLEEP_S + PIN_S_PER_GIB * gib, 1),
        "later_sleep_s": SLEEP_S,
        "wake_s": WAKE_S,
        "last_start_s": start if isinstance(start, int | float) else None,
    }


def can_sleep(candidate: Candidate) -> bool:
    """Started with sleep mode and its routes (what `park = "sleep"` renders)."""
    return SLEEP_FLAG in candidate.argv and candidate.env.get(DEV_MODE) == "1"


def other_port(serving: Candidate) -> int | None:
    """The port a candidate starts on while `serving` sleeps on its own."""
    park_port = serving.settings.park_port
    if park_port is None:
        return None
    return park_port if serving.port == serving.home_port else serving.home_port


def why_not_park(
    serving: Candidate, weights_gib: object, candidate: Candidate, available_gib: Callable[[], float]
) -> str | None:
    """Why `serving` cannot sleep for `candidate` (then it is stopped, as without park), or None.
    `weights_gib`: what its log said it loaded; `available_gib`: the host's RAM now."""
    if not can_sleep(serving):
        return "the serving engine was started without sleep mode (park was off then)"
    if serving.settings.park_port is None or candidate.home_port != serving.home_port:
        return "the change moves engine.port: nothing to alternate with"
    if isinstance(weights_gib, int | float):
        floor = SettingValues.of(PREFLIGHT, candidate.profile_data.get("preflight")).number(
            "min_host_available_gib"
        )
        available = available_gib()
        if available - float(weights_gib) < floor:
            return (
                f"host RAM: {available:.1f} GiB available cannot hold the {weights_gib:.1f} GiB of "
                f"weights a sleep moves there and keep {floor:g} GiB free"
            )
    return None


def residue_problem(awake_bytes: int | None, asleep_bytes: int | None) -> str | None:
    """Why an engine that says it sleeps is not asleep enough (NVML's figures), or None; no figures, no
    verdict."""
    if awake_bytes and asleep_bytes is not None and not asleep_enough(awake_bytes, asleep_bytes):
        return f"still holds {asleep_bytes / MIB:.0f} MiB of GPU memory ({awake_bytes / MIB:.0f} MiB awake)"
    return None


def why_not_lend(serving: Candidate | None) -> str | None:
    """Why what serves cannot sleep and lend its GPUs to `launch probe`'s arms, or None."""
    if serving is None:
        return "nothing serves"
    if serving.settings.park != "sleep" or not can_sleep(serving):
        return 'the profile does not park (park = "sleep" and a start with sleep mode)'
    if other_port(serving) is None:
        return "no park_port to run the arms on"
    return None


def switch_argv(serving: Candidate) -> list[str] | None:
    """The `on_switch` command for what serves now, its `{profile}`, `{host}`, `{port}`, `{url}` filled
    in (docs/park.md); None where the profile sets none."""
    command = serving.settings.on_switch
    if not command:
        return None
    host = "127.0.0.1" if serving.host in ("0.0.0.0", "", "::") else serving.host
    fields = {"profile": serving.profile, "host": host, "port": str(serving.port), "url": serving.base_url}
    return [part.format_map(fields) for part in command]


def run_switch(argv: list[str], timeout_s: float = 30.0) -> tuple[int | None, str]:
    """Run the hook without a shell; (exit code or None when it could not run, its last output)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{type(err).__name__}: {err}"
    return done.returncode, (done.stdout + done.stderr)[-500:]
