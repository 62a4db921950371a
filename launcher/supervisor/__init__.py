"""The supervisor: one launcher's life around its engine — start a candidate, gate it, promote it or
roll back to last-good by itself, keep what serves watched, reload on SIGHUP, park the serving
engine beside a change, lend it to `launch probe`.

The serve loop is `service.Supervisor.run`, one class built of three halves: `reload.Reloading`
(SIGHUP, `launch set --apply`, `launch rollback`: keep what serves unless the change can start),
`recovery.Watching` (what the serving watch's verdicts do) and `park.Parking` (`park = "sleep"`, the
probe's lend; the routes and the rules: `sleep.py`). Everything it drives goes through one seam
module, `seams.py` (the engine, its judge, vLLM's sleep routes, the host hooks, systemd), whose real
implementations `wiring.py` alone plugs in. tests/engine_double.py plays the engine and the judge
from a script, so tests/unit/test_supervisor_decisions.py runs every decision — promote, roll back,
last-good failing too, reload accepted / unchanged / refused / invalid / rejected, death after
promotion, stop while gating — through the real `Supervisor.run` (lock, state dir, restart guard,
real signals) in a fraction of a second each; tests/integration/test_supervisor*.py and
test_reload_keeps_serving.py prove the wiring with vllm-sim.

One attempt's life (`attempt.py`) is the same for serve, try and the probe's arms: `launch_attempt`
takes the candidate's GPU locks, starts it, and releases the locks if the start raises; otherwise
the `Attempt` holds them until `stop()` has ended its whole group (TERM → grace → KILL, leftovers
checked). While an attempt starts or gates, `StopOnSignal` ends its engine from a helper thread
when a stop signal is recorded, so a gate blocked in HTTP returns at once:

    who                    starts (launch_attempt)           stops                  on a signal
    launch --profile       the candidate, then last-good     Supervisor._stop_current  _stop_current
    launch try             the profile, never promoted       on the way out          engine.stop
    launch probe's arms    each arm, with the probe's marker  Trial.stop_current     Trial.interrupt

The state machine: every change of the serve loop goes through `status.Transitions.record` — the
history record first (`history.Event`, the strings history.jsonl always carried), then status.json
(what `launch status` and a reload's requester poll: once it shows a phase, the record is there),
then the Prometheus textfile, the progress line, and systemd (READY=1 only once the status says
serving). A reload's outcome reaches its requester as `reloads/ID.verdict.json`
(`reload_requests.Outcome`: promoted, unchanged, refused, invalid, rolled_back, failed, with its
exit code); `launch set --apply` and `launch rollback` choose their words by it, never by the
detail's words, and a verdict without the field (an older launcher's) reads as its exit code implies.
"""
