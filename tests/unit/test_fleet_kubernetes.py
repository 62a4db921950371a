"""fleet/kubernetes without a cluster: every manifest against the Kubernetes schemas that
kubernetes-validate ships (offline: a test below forbids the network while it validates), the Argo
Rollouts objects through the Kubernetes objects they embed, the probes through the real `launch
check` option parser, the ConfigMap's profile through the real profile validation."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher.commands.check_cmd import check_cmd
from launcher.profile.plan import build_plan

yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "fleet" / "kubernetes"
K8S_VERSION = "1.33"
ARGO_KINDS = {"Rollout", "AnalysisTemplate"}
STARTUP_BUDGET_S = 1800  # the health gate's own default deadline: a large model loads that long


def documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(KUBE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in documents() if doc["kind"] == kind]


def wrap(kind: str, api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "embedded"}, "spec": spec}


def validate(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("kubernetes-validate tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_every_kubernetes_object_validates_offline(no_network: None) -> None:
    kinds = []
    for name, doc in documents():
        kinds.append(doc["kind"])
        if doc["kind"] not in ARGO_KINDS:
            try:
                validate(doc)
            except kubernetes_validate.ValidationError as err:
                pytest.fail(f"{name}: {err}")
    assert sorted(kinds) == ["AnalysisTemplate", "ConfigMap", "Deployment", "Rollout", "Service", "Service"]


def test_strict_validation_catches_a_misspelt_field() -> None:
    [deployment] = by_kind("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["periodSecond"] = 10
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)


def test_argo_objects_embed_valid_kubernetes_objects() -> None:
    [rollout] = by_kind("Rollout")
    [template] = by_kind("AnalysisTemplate")
    assert rollout["apiVersion"] == template["apiVersion"] == "argoproj.io/v1alpha1"
    validate(wrap("Deployment", "apps/v1", {"selector": rollout["spec"]["selector"],
                                            "template": rollout["spec"]["template"]}))  # fmt: skip
    [metric] = template["spec"]["metrics"]
    validate(wrap("Job", "batch/v1", metric["provider"]["job"]["spec"]))
    steps = rollout["spec"]["strategy"]["canary"]["steps"]
    analysis = next(step["analysis"] for step in steps if "analysis" in step)
    assert [t["templateName"] for t in analysis["templates"]] == [template["metadata"]["name"]]
    declared = {arg["name"] for arg in template["spec"]["args"]}
    given = {arg["name"] for arg in analysis["args"]}
    defaulted = {arg["name"] for arg in template["spec"]["args"] if "value" in arg}
    assert given <= declared and declared - defaulted <= given  # every argument without a default is given
    canary = rollout["spec"]["strategy"]["canary"]
    services = {doc["metadata"]["name"] for doc in by_kind("Service")}
    assert {canary["canaryService"], canary["stableService"]} <= services


def probe_commands() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for workload in [*by_kind("Deployment"), *by_kind("Rollout")]:
        [container] = workload["spec"]["template"]["spec"]["containers"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            found.append((workload["kind"], probe, container[probe]))
    return found


@pytest.mark.parametrize(
    ("kind", "probe", "spec"), probe_commands(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_probes_are_launch_check_with_options_it_takes(kind: str, probe: str, spec: dict[str, Any]) -> None:
    command = spec["exec"]["command"]
    assert command[:2] == ["launch", "check"]
    ctx = check_cmd.make_context("check", list(command[2:]))  # the real parser: a typo fails here
    timeout_s = float(ctx.params["timeout_s"])
    # /health + /v1/models, + tool_call's two; --live: /health + /v1/models + one generation
    requests = 2 if ctx.params["gate_list"] == "health" else 3 if ctx.params["live"] else 4
    assert spec["timeoutSeconds"] >= requests * timeout_s, "the kubelet would kill a check still in time"
    if probe == "startupProbe":
        assert spec["periodSeconds"] * spec["failureThreshold"] >= STARTUP_BUDGET_S
    if probe == "livenessProbe":
        assert ctx.params["live"], "the liveness probe must generate: a hung engine answers /health 200"


def test_analysis_job_runs_launch_check() -> None:
    [template] = by_kind("AnalysisTemplate")
    job = template["spec"]["metrics"][0]["provider"]["job"]["spec"]
    [container] = job["template"]["spec"]["containers"]
    assert container["command"][:2] == ["launch", "check"]
    args = [a.replace("{{args.profile}}", "prod").replace("{{args.url}}", "http://canary:8000")
            for a in container["command"][2:]]  # fmt: skip
    check_cmd.make_context("check", args)


def test_the_configmap_profile_is_a_valid_profile(tmp_path: Path) -> None:
    [config] = by_kind("ConfigMap")
    for name, text in config["data"].items():
        (tmp_path / name).write_text(text)
    plan = build_plan(tmp_path, "prod")
    assert plan.errors == ()
    assert plan.port == 8000 and plan.host == "0.0.0.0"  # the Service's target, reachable in the pod


def test_dockerfile_builds_on_the_official_image_and_copies_what_exists() -> None:
    lines = [ln.strip() for ln in (KUBE / "Dockerfile").read_text().splitlines() if ln.strip()]
    image = next(ln.split("=", 1)[1] for ln in lines if ln.startswith("ARG VLLM_IMAGE="))
    repository, tag = image.split(":")
    assert repository == "vllm/vllm-openai" and tag.startswith("v") and tag != "latest"
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
    assert 'ENTRYPOINT ["launch"]' in lines
    kept = (KUBE / "Dockerfile.dockerignore").read_text()
    assert all(f"!{path}" in kept for path in ("pyproject.toml", "launcher/", "gates/"))
