"""NO_COLOR (https://no-color.org): no ANSI styles from the CLI or the live log renderer when set."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner

from launcher.cli import launch
from launcher.supervisor.progress import configure_logging

ESC = "\x1b["


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _dry_run_with_a_warning(shipped_profiles: Path, state_dir: Path, env: dict[str, str]) -> str:
    facts = state_dir / "profiles" / "prod" / "last_facts.json"
    facts.parent.mkdir(parents=True, exist_ok=True)
    facts.write_text(json.dumps({"kv_cache_tokens": 1_000_000}))  # a KV pool below 1x: a warning
    args = [
        "--profiles-dir",
        str(shipped_profiles),
        "--state-dir",
        str(state_dir),
        "--profile",
        "prod",
        "--dry-run",
    ]
    result = CliRunner().invoke(launch, args, color=True, env=env)  # color=True: as on a terminal
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output
    return result.output


def test_the_cli_styles_on_a_terminal_and_not_with_no_color(shipped_profiles: Path, state_dir: Path) -> None:
    assert ESC in _dry_run_with_a_warning(shipped_profiles, state_dir, {"NO_COLOR": ""})  # empty: ignored
    assert ESC not in _dry_run_with_a_warning(shipped_profiles, state_dir, {"NO_COLOR": "1"})


@pytest.fixture
def restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("restore_structlog")
@pytest.mark.parametrize(("no_color", "styled"), [(None, True), ("1", False)])
def test_the_console_renderer_follows_no_color(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, styled: bool
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    out = Terminal()
    configure_logging(out)
    structlog.get_logger("vllm-gate").warning("gate failed", gate="smoke")
    assert "gate failed" in out.getvalue()
    assert (ESC in out.getvalue()) is styled
