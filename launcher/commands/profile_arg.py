"""One convention for naming the profile a command acts on: `--profile NAME`, as `launch --profile
prod`, `try`, `check`, `status`, `rollback` and the rest take it (`profile_option`: one spelling,
one metavar, the profiles completed). `set` and `logs` took it as their first argument; that older
form is still accepted, so scripts keep working."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from launcher.completion import profile_names
from launcher.errors import BadInput

F = TypeVar("F", bound=Callable[..., Any])


def profile_option(help: str, *, dest: str = "profile", required: bool = False) -> Callable[[F], F]:
    """`--profile NAME`, completed from the profiles dir; `help` says what the command does with it."""
    return click.option(
        "--profile", dest, shell_complete=profile_names, metavar="NAME", required=required, help=help
    )


def profile_of(command: str, option: str | None, positional: str | None) -> str:
    """`launch logs --profile prod` or the older `launch logs prod`; both, naming two, is an error."""
    if option is not None and positional is not None and option != positional:
        raise BadInput(
            f"`launch {command}` was given two profiles: --profile {option} and {positional}",
            hint=f"name one: `launch {command} --profile NAME`",
        )
    name = option if option is not None else positional
    if name is None:
        raise BadInput(f"`launch {command}` needs a profile", hint=f"`launch {command} --profile NAME`")
    return name


def profile_and_assignments(option: str | None, words: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """`launch set --profile prod k=v…` or the older `launch set prod k=v…`: a profile name never
    holds `=`, an assignment always does, so the first word tells which form was used."""
    first = words[0] if words else None
    if first is not None and "=" not in first:
        return profile_of("set", option, first), words[1:]
    return profile_of("set", option, None), words
