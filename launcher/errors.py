"""The operator-facing error tree: each class carries its exit code, mapped once at the CLI edge."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of `launch`; documented in `launch --help` and docs/exit-codes.md."""

    OK = 0
    GATE_FAILED = 1
    BAD_INPUT = 2
    ROLLED_BACK = 3
    PREFLIGHT_REFUSED = 4
    ENGINE_DIED = 5
    BUG = 70  # EX_SOFTWARE (sysexits.h): an unexpected error in the launcher, never an operator error
    # EX_IOERR (sysexits.h): stdout could not be written (a full disk, a closed descriptor); the
    # command's answer is lost, which is neither the operator's input nor a bug in the launcher.
    OUTPUT_LOST = 74
    # 128 + SIGPIPE, what the shell reports for `yes | head -1`: the reader closed the pipe, which is
    # its choice, not an error; a `set -o pipefail` script still sees that the command did not finish.
    CLOSED_PIPE = 141


class GateError(Exception):
    """Base of every error meant for the operator (never a bug): one paragraph, no traceback."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class OutputLost(Exception):
    """stdout refused the command's answer (ENOSPC, EBADF, EIO; a closed pipe is `BrokenPipeError`,
    the reader's choice). Not a GateError: no command catches it on the way to the CLI edge."""

    exit_code = ExitCode.OUTPUT_LOST

    def __init__(self, cause: OSError) -> None:
        super().__init__(
            f"launch could not write its output to stdout ({cause.strerror or cause}): the answer is "
            f"incomplete; exit {int(self.exit_code)}"
        )
        self.cause = cause


class BadInput(GateError):
    """A profile, flag, file or argument the operator gave is wrong; nothing was changed."""

    exit_code = ExitCode.BAD_INPUT


class ProfileNotFound(BadInput):
    pass


class ProfileSyntaxError(BadInput):
    pass


class ProfileInvalid(BadInput):
    """Validation found errors; `problems` lists them all (not only the first)."""

    def __init__(self, message: str, problems: list[str], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems


class PreflightRefused(GateError):
    exit_code = ExitCode.PREFLIGHT_REFUSED


class GateFailed(GateError):
    exit_code = ExitCode.GATE_FAILED


class NothingMeasured(GateError):
    """`launch bench` ran but no request succeeded: a number of zero cells is no measurement."""

    exit_code = ExitCode.GATE_FAILED


class ChangeInProgress(GateError):
    """Another `launch set` / `launch rollback` is changing the same profile (named in the message):
    refused before anything was read or written, as a candidate is refused before anything stops."""

    exit_code = ExitCode.PREFLIGHT_REFUSED


class AlreadyRunning(GateError):
    """Another launcher holds the profile's lock (its pid is in the message)."""

    exit_code = ExitCode.BAD_INPUT
