"""The leaf every product package may build on: the types the whole launcher shares and that
belong to no one part of it — the clock (`clock`: the `Clock` seam and the real `SystemClock`), a
setting declared once (`setting`: `Setting`, read through `SettingValues`, which owns the
defaults), and the simulated GPU set (`simgpus`), which the simulator writes and the launcher reads.
It imports nothing of ours (tests/unit/test_layering.py): gates/, launcher/ and vllm_sim/ import
it, so none has to own what another needs.
"""
