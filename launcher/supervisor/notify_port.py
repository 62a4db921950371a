"""What the supervisor tells the service manager; the sd_notify implementation lives in launcher/host."""

from __future__ import annotations

from typing import Protocol


class Notifier(Protocol):
    def ready(self, status: str) -> object: ...

    def status(self, text: str) -> object: ...

    def reloading(self) -> object: ...

    def stopping(self) -> object: ...

    def watchdog(self) -> object: ...

    def extend_timeout(self, seconds: float) -> object: ...


class NullNotifier:
    """Not under systemd: nothing to tell."""

    def ready(self, status: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def reloading(self) -> None:
        pass

    def stopping(self) -> None:
        pass

    def watchdog(self) -> None:
        pass

    def extend_timeout(self, seconds: float) -> None:
        pass
