"""How long an HA connection may stay silent, without a timeout scope per receive."""

from __future__ import annotations

import anyio


class SilenceLimit:
    """A cancel scope that ends once nothing was heard for ``seconds``.

    ``mark_activity()`` after each receive moves the deadline on, at most once per
    hundredth of the limit (so a connection is given at least 99% of it): moving a
    deadline costs ~9 us here, entering a timeout scope of its own per receive ~34 us,
    which a slave and its master paid for every chunk and every report."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._moved_at = anyio.current_time()
        self._step = seconds / 100
        self.scope = anyio.CancelScope(deadline=self._moved_at + seconds)

    def mark_activity(self) -> None:
        now = anyio.current_time()
        if now - self._moved_at >= self._step:
            self.scope.deadline = now + self.seconds
            self._moved_at = now

    @property
    def timed_out(self) -> bool:
        """Whether the scope ended for silence."""
        return self.scope.cancelled_caught
