"""Secrets never printed: the API key and the Hugging Face token, wherever a launch is shown.

A profile may not hold a literal key (it names an environment variable instead), yet the dry run of
a profile that does, `set`/`rollback` diffs and the history all show argv; and vLLM itself logs its
`non-default args: {... 'api_key': ['sk-...']}` line at startup when given `--api-key`. Each of
those goes through here. `***` replaces the value; the flag's presence stays visible.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"
SECRET_FLAGS = frozenset({"--api-key", "--hf-token"})
SECRET_ENV = frozenset({"VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary text

# vLLM's `non-default args` dict (a list since `--api-key` may repeat) and a command line in a log.
_DICT_ITEM = re.compile(r"""(['"](?:api_key|hf_token)['"]\s*:\s*)(\[[^\]]*\]|'[^']*'|"[^"]*")""")
_FLAG_VALUE = re.compile(r"(--(?:api-key|hf-token)(?:=|\s+))(?!\*\*\*)([^\s'\",\]]+)")


def redact_argv(argv: Sequence[str]) -> list[str]:
    """argv with the value of every secret flag (`--api-key X`, `--api-key=X`) masked."""
    out: list[str] = []
    masking = False
    for token in argv:
        if masking and not token.startswith("--"):
            out.append(MASK)
            continue
        masking = token in SECRET_FLAGS
        flag, eq, _ = token.partition("=")
        out.append(f"{flag}={MASK}" if eq and flag in SECRET_FLAGS else token)
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if k in SECRET_ENV else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the secret variables in an environment (what the engine was given)."""
    return tuple(v for k, v in env.items() if k in SECRET_ENV and len(v) >= _MIN_SECRET_LEN)


class LineRedactor:
    """Masks known secret values and vLLM's printed `api_key`/`hf_token` in complete lines of log."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        if "api" in text or "token" in text:
            text = _DICT_ITEM.sub(rf"\g<1>'{MASK}'", text)
            text = _FLAG_VALUE.sub(rf"\g<1>{MASK}", text)
        return text
