"""`launch check --profile NAME`: does the running server pass its gates now? Exit 0 / 1 / 2.

Made to be a probe (Kubernetes startupProbe/readinessProbe, an Argo Rollouts analysis, an Ansible
task): it starts, stops, promotes and writes nothing, and prints one line per gate.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import click

from launcher.commands.profile_arg import profile_option
from launcher.settings import GlobalOptions

URL_HINT = "for example --url http://10.0.0.7:8000"


@click.command("check")
@profile_option("Profile whose gates to run.", dest="name", required=True)
@click.option("--url", metavar="URL", help="Server to check [default: what serves the profile now].")
@click.option(
    "--gates",
    "gate_list",
    default=None,
    metavar="A,B",
    help="Gates to run: health, tool_call, smoke, canary (the ones that need no start log) "
    "[default: health,tool_call].",
)
@click.option(
    "--live",
    is_flag=True,
    help="The liveness probe: /health and one short generation within --timeout-s (the gates "
    "health,canary); a hung engine answers /health 200, only a generation tells.",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0.1, max=3600),
    default=10.0,
    show_default=True,
    help="Timeout of each HTTP request.",
)
@click.option(
    "--wait-s",
    type=click.FloatRange(min=0, max=86400),
    default=0.0,
    show_default=True,
    help="Keep asking a gate that says 'not yet' (no answer, /health not 200) this long; 0 asks once.",
)
@click.option("--full", is_flag=True, help="Every tool-call case of the profile, not only its first.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.pass_obj
def check_cmd(
    options: GlobalOptions,
    name: str,
    url: str | None,
    gate_list: str | None,
    live: bool,
    timeout_s: float,
    wait_s: float,
    full: bool,
    as_json: bool,
) -> None:
    """Run the non-disruptive gates against the server that runs now; start, stop or change nothing.

    \b
    Exit 0 when every gate passed, 1 when one failed, 2 on bad input.
      launch check --profile prod
      launch check --profile prod --live --timeout-s 10      # a Kubernetes livenessProbe
      launch check --profile prod --url http://10.0.0.7:8000 --gates health --json

    Without --url it asks what serves now: the profile's front door when it has one, else the
    engine on the port a parked change left it on (launch status's url), else engine.port.
    """
    from launcher.check import DEFAULT_GATES, LIVE_GATES, CheckRequest, parse_gate_names, run_check
    from launcher.errors import BadInput, ExitCode

    if live and gate_list is not None:
        raise BadInput("--live and --gates name the gates twice", hint="--live is --gates health,canary")
    gate_list = (
        ",".join(LIVE_GATES) if live else (gate_list if gate_list is not None else ",".join(DEFAULT_GATES))
    )
    from launcher.profile.candidate import Candidate
    from launcher.profile.plan import build_plan
    from launcher.state.serving import reach_now
    from launcher.state.store import StateStore

    gates = parse_gate_names(gate_list)
    checked_url = _checked_url(url)
    plan = build_plan(options.profiles_dir, name)
    plan.raise_for_errors()
    candidate = Candidate.from_plan(plan)
    # what serves now: its front door, else the port a parked change left it on, else engine.port
    target_url = checked_url or reach_now(StateStore(options.state_dir), name, plan.profile.data)
    request = CheckRequest(gates=gates, url=target_url, timeout_s=timeout_s, wait_s=wait_s, full=full)
    started = time.monotonic()
    report = run_check(candidate, request)
    took = time.monotonic() - started
    target = request.url or candidate.base_url
    if as_json:
        payload = {
            "profile": name,
            "url": target,
            "passed": report.passed,
            "duration_s": round(took, 3),
            "gates": report.to_json(),
        }
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        for result in report.results:
            click.echo(
                f"{result.verdict.upper():<5} {result.name:<10} {result.duration_s:6.2f}s  {result.summary}"
            )
        verdict = "passed" if report.passed else "FAILED"
        click.echo(f"check {name} at {target}: {verdict} in {took:.2f}s")
    click.get_current_context().exit(int(ExitCode.OK if report.passed else ExitCode.GATE_FAILED))


def _checked_url(url: str | None) -> str | None:
    from launcher.errors import BadInput

    if url is None:
        return None
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is no number or out of range
    except ValueError as err:
        raise BadInput(f"--url {url!r} is not a URL ({err})", hint=URL_HINT) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--url {url!r} is not an http(s) URL with a host", hint=URL_HINT)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BadInput(f"--url {url!r} has a path; give the server's root", hint=URL_HINT)
    return f"{parts.scheme}://{parts.netloc}"
