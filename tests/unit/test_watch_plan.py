"""What the serving watch reads of the launch that serves (launcher/watch/runner.py `WatchPlan.of`):
tool-call canaries only where the chain has the tool gate — a server started without tool calling
answers them 400, the profile's choice and no sickness (issue 42: `degraded` for good)."""

from __future__ import annotations

from pathlib import Path

from launcher.watch.runner import WatchPlan
from tests.launcher_run import append_table
from tests.supervisor_rig import Rig


def test_a_chain_with_the_tool_gate_gets_its_first_case_as_the_tool_call_canary(tmp_path: Path) -> None:
    plan = WatchPlan.of(Rig(tmp_path).candidate())  # the default chain: kernel_marker … tool_call
    assert plan.tool_case is not None and plan.tool_call_every == 20


def test_a_chain_without_the_tool_gate_sends_no_tool_call_canary(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    path = rig.profiles / "svc.toml"
    rig.candidate()
    append_table(path, "gates", {"order": ["health", "canary"]})
    plan = WatchPlan.of(rig.candidate_now())
    assert plan.tool_case is None  # every canary is a plain generation
