"""The supervisor: one launcher's life around its engine — start a candidate, gate it, promote it or
roll back to last-good by itself, keep what serves watched, reload on SIGHUP, park the serving
engine beside a change, lend it to `launch probe`.

One serving state, one clock. `state.ServingState` is the explicit record — what serves, what is on
trial, what is parked, to whom the sleeper's GPUs are lent, the serving watch, where the proxy was
last pointed — owned by `service.Supervisor` and changed only through its methods, under its lock.
The collaborators are built once over it, each with the `context.Context` (the state, the seams, the
transitions, the clock) and only the collaborators it needs, in this order (no circle):

    stage      stops what runs, puts an engine on as what serves (recorded, proxy told, watched)
    park       sleeps what serves beside a change; wakes and re-gates it on a rejection
    bringup    start, gate, promote — or roll back (waking the sleeper, else last-good cold)
    recovery   the serving watch's verdicts: restart, roll back, log
    lending    the sleeper's GPUs lent to `launch probe`, and taken back
    reload     SIGHUP: keep what serves unless the change can start
    service    the serve loop: signals, a death, the lender, the watch's news

Everything they drive goes through one seam module, `seams.py` (the engine, its judge, vLLM's sleep
routes, the host hooks, systemd), whose real implementations `wiring.py` alone plugs in. Time is
read only through `basis.clock.Clock` (tests/unit/test_supervisor_clock.py), so every decision runs
on a fake clock: tests/engine_double.py plays the engine and the judge from a script, and
tests/unit/test_supervisor_decisions.py runs each decision through the real `Supervisor.run` in a
fraction of a second; tests/integration/test_supervisor*.py prove the wiring with vllm-sim.

One attempt's life (`attempt.py`) is the same for serve, try and the probe's arms: `launch_attempt`
takes the candidate's GPU locks, starts it, and releases the locks if the start raises; otherwise
the `Attempt` holds them until `stop()` has ended its whole group (TERM → grace → KILL, leftovers
checked). While an attempt starts or gates, `StopOnSignal` ends its engine from a helper thread
when a stop signal is recorded, so a gate blocked in HTTP returns at once:

    who                    starts (launch_attempt)           stops                    on a signal
    launch --profile       the candidate, then last-good     Stage.stop_running       stop_running
    launch try             the profile, never promoted       on the way out           engine.stop
    launch probe's arms    each arm, with the probe's marker  Trial.stop_current       Trial.interrupt

The state machine: every change of the serve loop goes through `status.Transitions.record` — the
history record first (`history.Event`, the strings history.jsonl always carried), then status.json
(what `launch status` and a reload's requester poll: once it shows a phase, the record is there),
then the Prometheus textfile, the progress line, and systemd (READY=1 only once the status says
serving). A reload's outcome reaches its requester as `reloads/ID.verdict.json`
(`reload_requests.Outcome`: promoted, unchanged, refused, invalid, rolled_back, failed, with its
exit code); `launch set --apply` and `launch rollback` choose their words by it, never by the
detail's words, and a verdict without the field (an older launcher's) reads as its exit code implies.
"""
