"""What preflight tells the operator (launcher/host/report.py): the one paragraph of a refusal, its
hints once each, warnings that do not stop a start, the table `launch preflight` prints and its JSON,
with and without a reap before the checks."""

from __future__ import annotations

import json

import pytest

from launcher.errors import PreflightRefused
from launcher.host.reaper import Reaped, ReapOutcome, ReapReport
from launcher.host.report import (
    CheckName,
    CheckStatus,
    PreflightReport,
    ok,
    refused,
    skipped,
    warned,
)

GIB = 1 << 30
MEMORY = refused(
    CheckName.GPU_MEMORY, "GPU 0: free 10.00 GiB < needed 72.00 GiB", "stop the other model first"
)
ONE_MODEL = refused(CheckName.ONE_MODEL, "GPU 0 already serves a model", "stop the other model first")
PORT = refused(CheckName.PORT, "port 8000 is in use by pid 77", "choose another engine.port")
SWAP = warned(CheckName.SWAP, "swap used 3.0 GiB", "look at what swaps")
HOST = ok(CheckName.HOST_MEMORY, "available 120 GiB >= 16 GiB", available_gib=120)
NVML = skipped(CheckName.COMPILE_CACHE, "no compile cache set")


def report(
    *checks: object, reap: ReapReport | None = None, gpus: tuple[str, ...] = ("0",)
) -> PreflightReport:
    return PreflightReport("prod", checks, gpus, "CUDA_VISIBLE_DEVICES in the profile's [env]", reap)  # type: ignore[arg-type]


def test_a_refusal_is_one_paragraph_with_every_reason_in_check_order() -> None:
    found = report(MEMORY, HOST, PORT, SWAP)
    assert found.refused
    assert found.reason() == (
        "preflight refused to start profile 'prod': GPU 0: free 10.00 GiB < needed 72.00 GiB | "
        "port 8000 is in use by pid 77"
    )


def test_the_same_hint_is_given_once_and_only_refusals_give_hints() -> None:
    found = report(MEMORY, ONE_MODEL, PORT, SWAP)
    assert found.hint() == "stop the other model first; choose another engine.port"
    assert report(SWAP, HOST).hint() is None


def test_a_warning_does_not_refuse_and_is_listed_by_check() -> None:
    found = report(HOST, SWAP, NVML)
    assert not found.refused
    assert found.warnings() == ["swap: swap used 3.0 GiB"]
    found.raise_if_refused()  # nothing to raise


def test_raise_if_refused_carries_the_reason_and_the_hints() -> None:
    with pytest.raises(PreflightRefused) as caught:
        report(PORT, HOST).raise_if_refused()
    assert str(caught.value).startswith("preflight refused to start profile 'prod': port 8000")
    assert caught.value.hint == "choose another engine.port"


def test_a_check_is_found_by_name() -> None:
    assert report(HOST, PORT).check(CheckName.PORT) is PORT


def test_the_table_names_the_gpus_and_where_they_came_from_and_ends_with_the_verdict() -> None:
    lines = report(HOST, SWAP).render_text().splitlines()
    assert lines[0] == "preflight: profile 'prod', GPUs 0 (CUDA_VISIBLE_DEVICES in the profile's [env])"
    assert lines[1].split(None, 2) == ["ok", "host_memory", "available 120 GiB >= 16 GiB"]
    assert lines[2].split(None, 2) == ["warning", "swap", "swap used 3.0 GiB"]
    assert lines[-1] == "ok: every check passed or was skipped with its reason"
    assert report(PORT).render_text().splitlines()[-1] == "REFUSED"


def test_a_server_without_gpus_says_why_in_the_table() -> None:
    found = PreflightReport("demo", (HOST,), (), "the simulator without --sim-gpu-allocate uses no GPU")
    assert found.render_text().splitlines()[0] == (
        "preflight: profile 'demo', the simulator without --sim-gpu-allocate uses no GPU"
    )


REAPED = ReapReport(
    (Reaped(4242, "VLLM::EngineCore", ReapOutcome.TERMINATED, 0.4),
     Reaped(4243, "VLLM::Worker_TP0", ReapOutcome.KILLED, 10.26)),
    True, 1.5, {0: 10 * GIB}, {0: 78 * GIB},
)  # fmt: skip


def test_a_reap_before_the_checks_is_shown_first_with_each_outcome() -> None:
    lines = report(HOST, reap=REAPED).render_text().splitlines()
    assert lines[1:4] == [
        "  reaped   pid 4242 VLLM::EngineCore: ended after SIGTERM (0.4 s)",
        "  reaped   pid 4243 VLLM::Worker_TP0: ended after SIGKILL (10.3 s)",
        "  reaped   GPU memory back after 1.5 s",
    ]
    stuck = ReapReport(REAPED.processes, False, 30.0, {}, {})
    assert "  reaped   GPU memory NOT back after 30.0 s" in report(HOST, reap=stuck).render_text()
    no_nvml = ReapReport(REAPED.processes, None, 0.0, {}, {})
    assert "GPU memory" not in report(HOST, reap=no_nvml).render_text()


def test_the_json_has_every_check_its_data_and_the_reap_in_mib() -> None:
    data = report(MEMORY, HOST, reap=REAPED).to_json()
    assert json.loads(json.dumps(data)) == data
    assert (data["profile"], data["refused"], data["gpus"]) == ("prod", True, ["0"])
    assert data["reason"] == report(MEMORY, HOST).reason() and data["hint"] == "stop the other model first"
    assert data["checks"][1] == {
        "name": "host_memory", "status": "ok", "detail": "available 120 GiB >= 16 GiB", "hint": None,
        "available_gib": 120,
    }  # fmt: skip
    reaped = data["reaped"]
    assert reaped["processes"][1] == {
        "pid": 4243, "label": "VLLM::Worker_TP0", "outcome": "ended after SIGKILL", "seconds": 10.26,
    }  # fmt: skip
    assert (reaped["free_mib_before"], reaped["free_mib_after"]) == ({"0": 10240}, {"0": 79872})


def test_an_accepted_start_has_no_reason_or_hint_in_its_json() -> None:
    data = report(HOST, SWAP).to_json()
    assert (data["refused"], data["reason"], data["hint"], data["reaped"]) == (False, None, None, None)
    assert [c["status"] for c in data["checks"]] == [CheckStatus.OK, CheckStatus.WARNING]
