"""The state dir: every state file's path is a `store.StateStore` method or property, its name
spelled nowhere else in launcher/ (tests/unit/test_state_paths.py); the shape of each record is
checked when read (`records`: a corrupt state file is refused with exit 2 naming it, a corrupt
history line is skipped). `serving` is what `launch status` reports per profile (its JSON shape,
exit 0/3/4), `change_lock` one `set`/`rollback` per profile from reading it to the verdict (a second
is refused with exit 4 naming the first), `metrics` the launcher's Prometheus textfile. No state
file is followed through a link (`launcher/atomicfile.py`: `O_NOFOLLOW`). The layout: `store`'s
docstring.
"""
