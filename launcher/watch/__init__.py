"""The serving watch: a server is judged all the time after promotion, not once before it.

A promoted vLLM can stop serving while every cheap signal says it is up: an engine core that is
stopped or deadlocked still answers `/health` 200 (vLLM's health asks only whether the engine has
errored), a server can fail every request while `/health` says 200, and the host can run out of
memory under it. The watch sends a canary generation with a deadline, reads the free signals
between canaries (`/health`, `/metrics` progress and 5xx share, the state of every titled process,
host RAM and swap, the group's memory under the leak rule) and turns them into one verdict:
`serving`, `degraded` (a check failed; retried at once), `wedged`, `failing` or `starving`.
The supervisor acts on it (launcher/supervisor/service.py): evidence first, then restart,
rollback or log.

- `verdict`: the pure rules — observations in, one judgement out (a fake clock tests them);
- `probes`: the readers — each check as one function of what it reads (recorded text tests them);
- `runner`: the two threads that schedule the probes and report verdict changes;
- `incident`: the evidence bundle kept before an engine is stopped.
"""
