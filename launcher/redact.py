"""Secrets never printed: the API key and the Hugging Face token, wherever a launch is shown.

A profile may not hold a literal key (it names an environment variable instead), yet the dry run of
a profile that does, `set`/`rollback` diffs and the history all show argv; and vLLM itself logs its
`non-default args: {... 'api_key': ['sk-...']}` line at startup when given `--api-key`. Each of
those goes through here. `***` replaces the value; the flag's presence stays visible.

A secret is known by its name (`is_secret_name`: `*_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, and
the variable `engine.api_key_env` names, noted when a profile renders): `launch set --profile w
env.VLLM_API_KEY=sk-… --dry-run` printed the key on its `keys:` line, and the bug report of the same
command (stdout at /dev/full) held it on its `command:` line (issue 42).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MASK = "***"
SECRET_ENV = frozenset({"VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary text
_SECRET_SUFFIXES = ("_KEY", "_TOKEN")
_SECRET_WORDS = ("SECRET", "PASSWORD")
# Variables named by a rendered profile's engine.api_key_env: any name may hold the key. Kept for the
# life of this process, so a bug report written later still masks that variable's value.
_NOTED_NAMES: set[str] = set()

# vLLM's `non-default args` dict (a list since `--api-key` may repeat) and a command line in a log.
_DICT_ITEM = re.compile(r"""(['"](?:api_key|hf_token)['"]\s*:\s*)(\[[^\]]*\]|'[^']*'|"[^"]*")""")
_FLAG_VALUE = re.compile(r"(--(?:api-key|hf-token)(?:=|\s+))(?!\*\*\*)([^\s'\",\]]+)")


def note_secret_name(name: str) -> None:
    """`name` holds a secret wherever it appears (engine.api_key_env's variable)."""
    _NOTED_NAMES.add(name)


def is_secret_name(name: str) -> bool:
    """`VLLM_API_KEY`, `hf_token`, `--api-key`, `env.DB_PASSWORD`: a name that says it holds a secret
    (the last part of a dotted key; `-` read as `_`)."""
    bare = name.lstrip("-").rpartition(".")[2]
    upper = bare.upper().replace("-", "_")
    return (
        bare in _NOTED_NAMES
        or upper in SECRET_ENV
        or upper.endswith(_SECRET_SUFFIXES)
        or upper in ("KEY", "TOKEN")
        or any(word in upper for word in _SECRET_WORDS)
    )


def redact_argv(argv: Sequence[str]) -> list[str]:
    """argv with the value of every secret flag (`--api-key X`, `--api-key=X`) and of every secret
    assignment (`launch set … env.VLLM_API_KEY=X`) masked."""
    out: list[str] = []
    masking = False
    for token in argv:
        if masking and not token.startswith("--"):
            out.append(MASK)
            continue
        masking = token.startswith("--") and "=" not in token and is_secret_name(token)
        out.append(redact_word(token))
    return out


def redact_word(word: str) -> str:
    """`NAME=VALUE` (a `--flag=value`, a `KEY=VALUE` of `launch set`) with VALUE masked when NAME is a
    secret's; any other word as it is."""
    name, eq, value = word.partition("=")
    return f"{name}={MASK}" if eq and value != MASK and is_secret_name(name) else word


def assigned_secrets(argv: Sequence[str]) -> tuple[str, ...]:
    """The values argv assigns to secrets, as typed and unquoted (`env.VLLM_API_KEY="sk-…"`)."""
    values = []
    for word in argv:
        name, eq, value = word.partition("=")
        if eq and is_secret_name(name):
            values += [value.strip(), value.strip().strip("\"'")]
    return tuple(v for v in values if len(v) >= _MIN_SECRET_LEN)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the secret variables in an environment (what the engine was given)."""
    return tuple(v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_SECRET_LEN)


def secrets_in(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The values held under secret names anywhere in a profile's tables (`[env] VLLM_API_KEY`), as
    text: what a diff or a `keys:` line of that profile must not show. Iterative (bounds.py)."""
    found: list[str] = []
    stack: list[tuple[bool, Any]] = [(False, data)]
    while stack:
        secret, node = stack.pop()
        if isinstance(node, Mapping):
            stack += [(secret or (isinstance(k, str) and is_secret_name(k)), v) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(secret, item) for item in node]
        elif secret and not isinstance(node, bool):
            found.append(str(node))
    return tuple(v for v in found if len(v) >= _MIN_SECRET_LEN)


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
