"""`launch probe`: same-box A/B arms on top of the production profile, and production always back.

Arm 0 is production measured as it serves; every other arm is the production profile with only the
keys it names changed (in memory, never in the operator's file). Production is stopped once, each
arm is started, gated, warmed up and benchmarked `--runs` times, then production is restarted the
way it ran. A journal in STATE/probe/ lets the next `launch --profile` or `launch probe --recover`
finish the restore when the probe itself was killed (docs/probe.md).
"""

from __future__ import annotations
