"""The history's event names, declared once: the supervisor, `launch try` and `launch probe`
write them; the probe's preview, `launch logs`, the benches and the tests read them.

The values are the strings history.jsonl has always carried, so a file written before this enum
reads the same; an event name this launcher does not know (a newer launcher's) is kept as a string
by the readers, never an error.
"""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    # one start of one candidate (supervisor/service.py)
    START = "start"  # the engine was spawned: label, fingerprint, engine_pid, argv
    GATES = "gates"  # the chain's report: passed, gates
    PROMOTED = "promoted"  # recorded as last-good; READY=1
    REJECTED = "rejected"  # the gates, preflight or the restart guard turned the candidate down
    ROLLBACK = "rollback"  # last-good is started instead
    SERVING_LAST_GOOD = "serving_last_good"
    FAILED = "failed"  # nothing could be served, or the launcher left on an error
    PREFLIGHT_REFUSED = "preflight_refused"  # refused before anything started (exit 4)
    ENGINE_DIED = "engine_died"  # after promotion: how, pid, process
    ENGINE_STOPPED = "engine_stopped"  # the launcher stopped it: why, graceful, killed, leftovers
    STOPPED = "stopped"  # the launcher ended on a signal (or was found killed by the next start)
    LEAK_DETECTED = "leak_detected"  # written before the serving watch (its leaks are `starving`)
    # the serving watch (launcher/watch/, supervisor/recovery.py)
    WATCH = "watch"  # its verdict changed (degraded, or serving again): verdict, check, detail, process
    WEDGED = "wedged"  # requests hang: check, detail, process, figures, action, incident
    FAILING = "failing"  # requests answer errors
    STARVING = "starving"  # host RAM, swap or the leak rule
    RECOVERED = "recovered"  # serving again after the watch's restart: how, reason
    # a change tried beside a sleeping last-good (supervisor/park.py)
    PARKED = "parked"  # the serving engine sleeps: seconds, its GPU memory awake and asleep
    PARK_SKIPPED = "park_skipped"  # it could not sleep (no sleep mode, host RAM, a failed sleep): stopped
    WOKEN = "woken"  # the sleeper serves again after its candidate was rejected: seconds, gates
    WAKE_FAILED = "wake_failed"  # the wake, its prefix-cache reset or its re-gate failed: cold start
    SWITCHED = "switched"  # what serves moved to another port: the on_switch hook's command and exit
    # reloads (supervisor/reload.py)
    RELOAD = "reload"  # the serving engine is stopped for a new candidate
    RELOAD_NOOP = "reload_noop"  # the same launch: nothing restarted
    RELOAD_REFUSED = "reload_refused"  # the profile does not render, or preflight/the guard refused
    # the other writers
    TRY = "try"  # `launch try`
    PROBE_STARTED = "probe_started"
    PROBE_ARM = "probe_arm"
    PROBE_FINISHED = "probe_finished"
    PROBE_RECOVERED = "probe_recovered"  # the next start restored production after a killed probe
