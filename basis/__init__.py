"""The leaf every product package may build on: the types the whole launcher shares and that
belong to no one part of it — the clock (`clock`: the `Clock` seam and the real `SystemClock`) and
a setting declared once (`setting`: `Setting`, read through `SettingValues`, which owns the
defaults). It imports nothing of ours (tests/unit/test_layering.py): gates/ and launcher/ both
import it, so neither has to own what the other needs.
"""
