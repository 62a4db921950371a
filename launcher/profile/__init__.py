"""Profiles → a `LaunchPlan` (`plan.build_plan`, the one entry point): find and parse them, merge
the `extends` chain with provenance (`loader`), check known keys and types (`structure`), render
argv and env (`render`), catch flags that contradict each other (`semantics`), judge against the
option schema that applies (`schema_source`: the installed vLLM's, kept on disk by `schema_cache`
because reading it imports torch, else the committed 0.33.0 snapshot of `vllm_flags`). Every key
outside `[args]`/`[env]`/`[gates.*]` is declared once (`keys`: `SupervisorSettings` and
`engine_settings` read them); how deep and big an operator's value may be is checked before a
parser recurses (`bounds`). `launch set` edits a file in place keeping its comments (`edit`,
`proposal`, `snapshots`). Every key: docs/profiles.md.
"""
