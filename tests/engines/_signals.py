"""Abort signals for the engine tests."""

from __future__ import annotations

from aerix.abort import AbortSignal


class AbortAfter(AbortSignal):
    """A signal that reads as aborted after `n` checks: aborts at a known point."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    @property
    def aborted(self) -> bool:
        self.left -= 1
        return self.left < 0
