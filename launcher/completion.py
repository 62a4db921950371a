"""What the shell completes beyond commands and options: profile names, rollback tags and the keys
(and closed lists of values) `launch set` takes — click's `shell_complete=`, so bash, zsh and fish
complete alike (README, "Shell completion").

The shell runs the real `launch` on every <TAB> (`_LAUNCH_COMPLETE`), so a completer reads only
what is cheap and never raises: the profiles dir the command line names (`--profiles-dir`, else
$VLLM_GATE_PROFILES, else ./profiles), the state dir likewise, and vLLM's flags without importing
vLLM (`schema_source.load_without_importing`). A missing, unreadable or corrupt dir, profile or
record completes nothing rather than print a traceback into the shell.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from launcher.settings import GlobalOptions

Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]
MAX_PROFILES = 500  # files read for their description; a dir of thousands is not a profiles dir


def _never_raises(completer: Completer) -> Completer:
    @functools.wraps(completer)
    def quiet(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return completer(ctx, param, incomplete)
        except Exception:  # noqa: BLE001 - a traceback in the shell's prompt helps nobody
            return []

    return quiet


def _options(ctx: click.Context) -> GlobalOptions:
    """The dirs as the command would resolve them: `--profiles-dir`/`--state-dir` as parsed so far."""
    root = ctx.find_root().params
    return GlobalOptions.resolve(profiles_dir=root.get("profiles_dir"), state_dir=root.get("state_dir"))


def _profile_named(ctx: click.Context, *names: str) -> str | None:
    """The profile the command line names so far: the subcommand's own option, else `launch --profile`."""
    for name in names:
        value = ctx.params.get(name)
        if isinstance(value, str) and value:
            return value
    root = ctx.find_root().params.get("profile")
    return root if isinstance(root, str) and root else None


@_never_raises
def profile_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """`--profile <TAB>`: the profiles in the profiles dir, with their description."""
    return _profiles(_options(ctx).profiles_dir, incomplete)


def _profiles(profiles_dir: Path, incomplete: str) -> list[CompletionItem]:
    from launcher.profile.loader import NAME_RE, PROFILE_SUFFIX

    found = sorted((p.name.removesuffix(PROFILE_SUFFIX), p) for p in profiles_dir.glob(f"*{PROFILE_SUFFIX}"))
    files = [path for _, path in found if path.is_file()][:MAX_PROFILES]
    names = [p.name.removesuffix(PROFILE_SUFFIX) for p in files]
    return [
        CompletionItem(name, help=_description(path))
        for name, path in zip(names, files, strict=True)
        if name.startswith(incomplete) and NAME_RE.match(name)
    ]


def _description(path: Path) -> str | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = data.get("description")
    described = text.splitlines()[0] if isinstance(text, str) and text else None
    return f"(abstract) {described or ''}".strip() if data.get("abstract") is True else described


@_never_raises
def rollback_tags(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """`launch rollback <TAB>`: the profile's snapshot tags, newest first, with when each was saved;
    without --profile, those of the profile a running launcher serves."""
    from datetime import UTC, datetime

    from launcher.profile.snapshots import available_tags, bak_path

    options = _options(ctx)
    profile = _profile_named(ctx, "profile") or _served(options.state_dir)
    if profile is None:
        return []
    items = []
    for tag in available_tags(options.profiles_dir, profile):
        if tag.startswith(incomplete):
            saved = datetime.fromtimestamp(bak_path(options.profiles_dir, profile, tag).stat().st_mtime, UTC)
            items.append(CompletionItem(tag, help=f"saved {saved:%Y-%m-%d %H:%M} UTC"))
    return items


def _served(state_dir: Path) -> str | None:
    from launcher.commands.live_reload import served_profile
    from launcher.errors import BadInput

    try:
        return served_profile(state_dir)
    except BadInput:  # none running, or several: the operator names it
        return None


@_never_raises
def set_words(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """`launch set --profile P <TAB>`: `KEY=` for every key it takes, and after `KEY=` the values of
    a closed list (choices, true/false). The older `launch set P …` completes the profile first."""
    options = _options(ctx)
    words: tuple[str, ...] = tuple(ctx.params.get("words") or ())
    profile = _profile_named(ctx, "profile_option")
    if profile is None and not words:
        return _profiles(options.profiles_dir, incomplete)
    if profile is None:
        profile = words[0]
    catalogue = {a.key: a for a in _addresses(options.profiles_dir, profile)}
    key, value = _pending_value(words, incomplete, catalogue)
    if key is not None:
        prefix = "" if "=" not in incomplete else f"{key}="
        return [CompletionItem(prefix + v) for v in catalogue[key].values if v.startswith(value)]
    wanted = incomplete.replace("-", "_")
    return [
        CompletionItem(f"{a.key}=", help=a.help)
        for a in catalogue.values()
        if a.key.startswith(wanted) and (wanted.startswith("env.") or not a.key.startswith("env."))
    ]


def _pending_value(
    words: tuple[str, ...], incomplete: str, catalogue: dict[str, Any]
) -> tuple[str | None, str]:
    """(the key whose value is being completed, what of the value is typed). zsh and fish pass the
    word whole (`kv_cache_dtype=fp`); bash splits it at `=` (COMP_WORDBREAKS), so the key is the word
    before a `=` word, or, right after the `=`, the last word (click drops a lone `=`)."""
    if "=" in incomplete:
        key, _, value = incomplete.partition("=")
        return (key, value) if key in catalogue else (None, "")
    if len(words) >= 2 and words[-1] == "=" and words[-2] in catalogue:
        return words[-2], incomplete
    if words and words[-1] in catalogue and not incomplete:
        return words[-1], ""
    return None, ""


def _addresses(profiles_dir: Path, profile: str) -> list[Any]:
    """Every key of this profile's engine (the simulator's flags too where it runs `vllm-sim`)."""
    from launcher.profile.addresses import addresses
    from launcher.profile.schema_source import load_without_importing
    from vllm_flags.sim_flags import sim_option_specs

    return addresses(load_without_importing(), sim_option_specs() if _runs_sim(profiles_dir, profile) else [])


def _runs_sim(profiles_dir: Path, profile: str) -> bool:
    from launcher.errors import GateError
    from launcher.profile.keys import engine_settings
    from launcher.profile.loader import resolve

    try:
        command = engine_settings(resolve(profiles_dir, profile).data).value("command")
    except (GateError, OSError, ValueError):
        return False
    return isinstance(command, list) and bool(command) and Path(str(command[0])).name == "vllm-sim"
