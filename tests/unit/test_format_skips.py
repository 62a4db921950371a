"""The product's code is laid out by `ruff format`; opting out of it stays rare, and says why.

`# fmt: skip` (one statement) and `# fmt: off` (a region, up to `# fmt: on`) are for a literal table
whose layout carries meaning, never for a call wrapped by hand (ruff lays those out, or the code is
reshaped: a dict built first, keyword arguments). Each file holds exactly the opt-outs ALLOWED grants
it, with the reason: a new one needs its entry here, and one taken away must lower the figure, so the
count only goes down. Comments are read with `tokenize`: a string that spells the words is no opt-out.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator

from tests.conftest import REPO

PRODUCT = ("basis", "launcher", "gates", "vllm_flags", "vllm_sim")  # what CI's ruff checks
# The opt-outs ruff honours: `fmt: skip`, `fmt: off` and its older spelling `yapf: disable`.
OPT_OUT = re.compile(r"#\s*(?:fmt:\s*(?:skip|off)|yapf:\s*disable)\b")

# file -> (how many opt-outs, why the layout there carries meaning)
ALLOWED: dict[str, tuple[int, str]] = {
    "launcher/logfacts/phrasings.py": (
        1,
        "data, not code: the log phrasings, each record a dict of two to four lines that starts with "
        "its kind and origin; ruff would give every key a line of its own (`# fmt: off` over both lists)",
    ),
}


def opt_out_lines(source: str) -> Iterator[int]:
    """The line of each comment that turns ruff's formatter off."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and OPT_OUT.search(token.string):
            yield token.start[0]


def _opt_outs() -> dict[str, list[int]]:
    """File (relative, `/`-separated) -> the lines of its opt-outs, for every product file with one."""
    found: dict[str, list[int]] = {}
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            lines = list(opt_out_lines(path.read_text(encoding="utf-8")))
            if lines:
                found[path.relative_to(REPO).as_posix()] = lines
    return found


def test_the_scan_finds_each_spelling_and_only_comments() -> None:
    source = (
        'TABLE = {"a": 1}  # fmt: skip\n'
        "# fmt: off\n"
        "ROWS = [1,   2]\n"
        "# fmt: on\n"
        "LEGACY = [3,   4]  # yapf: disable\n"
        'TEXT = "# fmt: skip"  # a string that spells it, then an ordinary comment\n'
        "TIGHT = 5  #fmt:skip\n"
    )
    assert list(opt_out_lines(source)) == [1, 2, 5, 7]


def test_each_file_holds_exactly_the_opt_outs_allowed() -> None:
    found = _opt_outs()
    wrong = [
        f"{where}: {len(lines)} opt-out(s) at line(s) {', '.join(map(str, lines))}, "
        f"{ALLOWED.get(where, (0, ''))[0]} allowed"
        for where, lines in found.items()
        if len(lines) != ALLOWED.get(where, (0, ""))[0]
    ]
    wrong += [f"{where}: {n} allowed, none left" for where, (n, _) in ALLOWED.items() if where not in found]
    assert not wrong, (
        "let ruff format the code (reshape a long call: a dict first, keyword arguments), or, for a "
        "table whose layout carries meaning, give its count and reason in ALLOWED; a removed opt-out "
        "lowers its count:\n" + "\n".join(wrong)
    )


def test_every_allowance_says_why() -> None:
    assert all(count > 0 and len(why.split()) >= 5 for count, why in ALLOWED.values())
