"""The suite: tests/unit (pure functions and test doubles, milliseconds each), tests/integration
(real processes on loopback: the real `launch` against `vllm-sim`), GPU tests behind the `gpu`
marker. No test judges the clock (docs/decisions/0013, enforced by tests/unit/test_no_wall_clock.py):
helpers' waits end at their event, with a hang's deadline (`simserver.HANG_S`). It runs on pytest-xdist
workers (`--dist loadgroup`; modules sharing one simulator mark an `xdist_group`; decisions 0010,
0013). Helpers: `ports.py` (each worker's own port block, below the ephemeral range), `bytecode.py`
(bytecode caches kept where `PYTHONDONTWRITEBYTECODE` is set), `engine_double.py` (a scripted engine
and judge for the supervisor's seams), `scripted_bench.py` (bench requests on a scripted clock),
`scripted_http.py` (a loopback HTTP server whose every reply a test writes, and `InstantVllm`),
`real_runs.py` (the recorded vLLM runs as simulator command lines), `waiters.py` (child processes that
wait to be signalled, polite or deaf).
"""
