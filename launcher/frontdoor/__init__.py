"""The front door: one stable port for clients, a real reverse proxy (Caddy) in its own process.

With `park = "sleep"` what serves moves between `engine.port` and `supervisor.park_port`
(decision 0011); clients should not follow it. `launch frontdoor --profile P` runs Caddy on
`[frontdoor] port` and the launcher points it at whichever engine serves now, holding requests at
the door (up to `hold_s`) while none does. The door outlives every launcher restart, crash and
SIGKILL: it is not the launcher's child (systemd runs it as `vllm-gate-frontdoor@P`).

Where traffic goes is one small file Caddy reads on every attempt (`{file.*}` in the upstream's
dial), not a config change through the admin API: a change reloads Caddy's whole config, and a
request held at the door under the old one is answered 502 at once (decision 0017, measured).
The admin API, on a unix socket only its owner can reach, answers what is in flight per engine:
what a drain waits on. docs/frontdoor.md.
"""
