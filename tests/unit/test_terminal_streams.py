"""What the launcher decides about its terminal (`launcher/terminal.py`): colour by NO_COLOR, journal by
JOURNAL_STREAM's device and inode, and a stderr whose reader left, on real files and pipes.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from launcher.terminal import DiagnosticStream, colour_allowed, is_journal


@pytest.mark.parametrize(
    ("value", "allowed"), [(None, True), ("", True), ("1", False), ("0", False), ("yes", False)]
)
def test_colour_unless_no_color_is_set_to_something(
    value: str | None, allowed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """no-color.org: any non-empty value turns colour off, `0` too."""
    if value is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", value)
    assert colour_allowed() is allowed


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "unit.log", "w", encoding="utf-8") as handle:
        yield handle


def device_inode(stream: TextIO) -> str:
    stat = os.fstat(stream.fileno())
    return f"{stat.st_dev}:{stat.st_ino}"


def test_a_stream_is_the_journal_when_its_device_and_inode_are_journal_streams(
    log_file: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", device_inode(log_file))
    assert is_journal(log_file)


def test_a_stream_redirected_elsewhere_is_not_the_journal_though_it_inherited_the_variable(
    log_file: TextIO, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(tmp_path / "other.log", "w", encoding="utf-8") as other:
        monkeypatch.setenv("JOURNAL_STREAM", device_inode(other))
        assert not is_journal(log_file)


def test_without_journal_stream_nothing_is_the_journal(
    log_file: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    assert not is_journal(log_file)


def test_a_stream_without_a_file_is_not_the_journal(
    log_file: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", device_inode(log_file))
    assert not is_journal(io.StringIO())  # no fileno: io.UnsupportedOperation
    log_file.close()
    assert not is_journal(log_file)  # closed: ValueError


@pytest.fixture
def reader_gone() -> Iterator[io.TextIOWrapper]:
    """A text stream on a pipe whose read end is closed: writing raises BrokenPipeError (EPIPE)."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stream = open(write_fd, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed below
    try:
        yield stream
    finally:
        with contextlib.suppress(BrokenPipeError):  # what is still buffered cannot reach anyone
            stream.close()


def test_lines_are_dropped_once_the_reader_has_gone_instead_of_raising(reader_gone: io.TextIOWrapper) -> None:
    stream = DiagnosticStream(reader_gone)
    assert stream.write("engine started\n") == len("engine started\n")  # what was asked, as written
    assert stream.reader_gone
    assert stream.write("and more\n") == len("and more\n")
    stream.flush()


def test_a_flush_that_finds_the_reader_gone_drops_what_follows(reader_gone: io.TextIOWrapper) -> None:
    reader_gone.reconfigure(line_buffering=False)
    stream = DiagnosticStream(reader_gone)
    stream.write("buffered, not yet sent")
    assert not stream.reader_gone
    stream.flush()
    assert stream.reader_gone


def test_a_stream_whose_reader_stays_gets_every_line(tmp_path: Path) -> None:
    with open(tmp_path / "stderr", "w", encoding="utf-8") as handle:
        stream = DiagnosticStream(handle)
        stream.write("one\n")
        stream.write("two\n")
        stream.flush()
        assert not stream.reader_gone
        assert (stream.encoding, stream.errors, stream.fileno()) == (
            handle.encoding,
            handle.errors,
            handle.fileno(),
        )
        assert stream.writable() and not stream.isatty()
    assert (tmp_path / "stderr").read_text(encoding="utf-8") == "one\ntwo\n"
