"""Caddy's config for a front door, rendered from the profile (deterministic), and the addresses
that go into it, checked before they do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launcher.frontdoor.config import FORWARDED_PATHS, PROXY_ID, caddy_config, config_text
from launcher.frontdoor.door import Door, door_of
from launcher.profile.frontdoor_address import (
    admin_problem,
    dial_problem,
    engine_dial,
    file_placeholder_problem,
    listen_host_problem,
    parse_admin,
    socket_path_problem,
)
from launcher.state.store import StateStore

STATE = Path("/var/lib/vllm-gate")


def door(frontdoor: dict[str, Any], supervisor: dict[str, Any] | None = None, state: Path = STATE) -> Door:
    data = {"engine": {"host": "127.0.0.1", "port": 8000}, "frontdoor": frontdoor,
            "supervisor": supervisor or {}}  # fmt: skip
    return door_of("prod", data, StateStore(state))


def proxy_of(config: dict[str, Any]) -> dict[str, Any]:
    routes = config["apps"]["http"]["servers"]["frontdoor"]["routes"]
    (handler,) = routes[0]["handle"]
    return dict(handler)


def test_the_same_profile_renders_the_same_bytes() -> None:
    first = config_text(door({"port": 9000, "hold_s": 30}))
    assert first == config_text(door({"port": 9000, "hold_s": 30}))
    assert first != config_text(door({"port": 9000, "hold_s": 31}))
    assert json.loads(first) == caddy_config(door({"port": 9000, "hold_s": 30}))


def test_one_proxy_forwards_to_the_target_file_holding_up_to_hold_s_and_streaming_at_once() -> None:
    config = caddy_config(door({"port": 9000, "hold_s": 2.5}))
    server = config["apps"]["http"]["servers"]["frontdoor"]
    assert server["listen"] == ["127.0.0.1:9000"]
    proxy = proxy_of(config)
    assert proxy["@id"] == PROXY_ID and proxy["handler"] == "reverse_proxy"
    assert proxy["upstreams"] == [{"dial": "{file./var/lib/vllm-gate/profiles/prod/frontdoor/upstream}"}]
    assert proxy["flush_interval"] == -1
    assert proxy["load_balancing"] == {"try_duration": "2500ms", "try_interval": "250ms"}
    assert "health_checks" not in proxy  # the launcher alone chooses where traffic goes
    assert server["routes"][0]["match"] == [{"path": list(FORWARDED_PATHS)}]


def test_what_is_not_forwarded_gets_a_404_in_vllms_error_shape() -> None:
    server = caddy_config(door({"port": 9000}))["apps"]["http"]["servers"]["frontdoor"]
    (answer,) = server["routes"][1]["handle"]
    assert "match" not in server["routes"][1]
    assert answer["status_code"] == 404
    body = json.loads(answer["body"])
    assert body["error"]["code"] == 404 and body["error"]["type"] == "NotFoundError"
    assert not any(
        path in FORWARDED_PATHS for path in ("/sleep", "/wake_up", "/collective_rpc", "/server_info")
    )


def test_an_unreached_engine_is_a_503_with_retry_after_and_an_openai_error_body() -> None:
    server = caddy_config(door({"port": 9000, "hold_s": 45, "retry_after_s": 7}))["apps"]["http"]["servers"]
    (route,) = server["frontdoor"]["errors"]["routes"]
    assert route["match"] == [{"vars": {"{http.error.status_code}": ["502", "503", "504"]}}]
    (answer,) = route["handle"]
    assert (answer["status_code"], answer["headers"]["Retry-After"]) == (503, ["7"])
    error = json.loads(answer["body"])["error"]
    assert set(error) == {"message", "type", "param", "code"}  # vllm-facts.md §7
    assert (error["type"], error["code"]) == ("ServiceUnavailableError", 503)
    assert "45 s" in error["message"] and "retry after 7 s" in error["message"]


def test_the_admin_api_listens_only_where_the_profile_says_and_persists_nothing() -> None:
    default = caddy_config(door({"port": 9000}))["admin"]
    assert default == {"listen": "unix//var/lib/vllm-gate/profiles/prod/frontdoor/admin.sock",
                       "config": {"persist": False}}  # fmt: skip
    assert caddy_config(door({"port": 9000, "admin": "[::1]:2019"}))["admin"]["listen"] == "[::1]:2019"
    assert (
        caddy_config(door({"port": 9000, "admin": "/run/door.sock"}))["admin"]["listen"]
        == "unix//run/door.sock"
    )


def test_logs_go_to_stderr_and_a_stop_lets_streams_finish_for_drain_timeout_s() -> None:
    config = caddy_config(door({"port": 9000, "drain_timeout_s": 12}))
    assert config["logging"]["logs"]["default"]["writer"] == {"output": "stderr"}
    assert config["apps"]["http"]["grace_period"] == "12000ms"
    # 0 would be Caddy's "forever": a zero drain is the shortest grace there is
    assert caddy_config(door({"port": 9000, "drain_timeout_s": 0}))["apps"]["http"]["grace_period"] == "1ms"


def test_an_ipv6_door_and_the_engines_it_may_point_at() -> None:
    assert door({"port": 9000, "host": "::"}).listen == "[::]:9000"
    assert door({"port": 9000, "host": "::"}).url == "http://[::1]:9000"
    parked = door({"port": 9000}, {"park": "sleep", "park_port": 8001})
    assert parked.engine_dials == ("127.0.0.1:8000", "127.0.0.1:8001")
    assert door({"port": 9000}, {"park_port": 8001}).engine_dials == ("127.0.0.1:8000",)  # park = "stop"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("/run/vllm-gate/door.sock", None),
        ("127.0.0.1:2019", None),
        ("[::1]:2019", None),
        ("localhost:2019", None),
        ("0.0.0.0:2019", "never on a network interface"),
        ("10.0.0.5:2019", "never on a network interface"),
        (":2019", "never on a network interface"),
        ("127.0.0.1:70000", "port 70000 is not in 1-65535"),
        ("127.0.0.1:0", "port 0 is not in 1-65535"),
        ("run/door.sock", "never on a network interface"),
        ("/run/door.sock|0777", "contains |"),
        ("/run/{env.HOME}.sock", "contains { }"),
        ("/run/door\n.sock", "control character"),
        ("/" + "d" * 120, "a unix socket path holds at most 107"),
    ],
)
def test_the_admin_address_is_a_unix_socket_or_loopback_and_nothing_else(
    text: str, problem: str | None
) -> None:
    found = admin_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found), found
    if problem is None:
        assert parse_admin(text).caddy_listen in (f"unix/{text}", text)
    else:
        with pytest.raises(ValueError):
            parse_admin(text)


def test_the_clients_host_is_an_ip_address_or_localhost() -> None:
    assert [listen_host_problem(h) for h in ("127.0.0.1", "0.0.0.0", "::", "::1", "localhost")] == [None] * 5
    for bad in ("gpu-01.lan", "127.0.0.1:80", "", "1.2.3.4 5.6.7.8", "{env.HOST}"):
        assert listen_host_problem(bad) is not None, bad


def test_a_dial_is_host_and_port_and_never_a_placeholder_or_a_path() -> None:
    for good in ("127.0.0.1:8000", "[::1]:8001", "localhost:8000", "gpu-01.lan:8000"):
        assert dial_problem(good) is None, good
    for bad in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "::1:8000", "[::x]:8000", "{file./x}:80",
                "unix//tmp/x.sock", "a b:80", "host:80\nx", ":8000"):  # fmt: skip
        assert dial_problem(bad) is not None, bad
    assert (engine_dial("0.0.0.0", 8000), engine_dial("::", 8001)) == ("127.0.0.1:8000", "[::1]:8001")


def test_the_target_file_and_a_socket_keep_to_what_caddy_reads_as_one_path() -> None:
    assert file_placeholder_problem("/var/lib/vllm-gate/profiles/p/frontdoor/upstream") is None
    assert file_placeholder_problem("/var/lib/a|b/upstream") is None  # a `|` means something in a socket only
    assert socket_path_problem("/var/lib/a|b/admin.sock") is not None
    for bad in ("/var/{x}/upstream", "/var/a\\b/upstream", "relative/upstream"):
        assert file_placeholder_problem(bad) is not None, bad
