"""Which response answers which request, and which requests have run out of time.

A pure table (no event loop, no clock): the connection passes the time in, as
``expired(now)``, and asks ``next_deadline()`` when to look again. A waiter is whatever
the connection waits on; this table only hands it back.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Generic, TypeVar

from ..errors import LocalProtocolError

if TYPE_CHECKING:
    from ..protocol.command import RemotingCommand

Waiter = TypeVar("Waiter")

# Answered requests leave their deadline in the heap (removing it would cost a search);
# the heap is rebuilt from the live ones once it holds this many times as many, plus
# the slack (amortised: a rebuild of n entries after 2n + slack adds).
_STALE_RATIO = 3
_STALE_SLACK = 256


class PendingRequests(Generic[Waiter]):
    """Requests waiting for their response, by opaque (the request id), with deadlines.

    ``complete`` is a dict lookup; deadlines live in a heap of ``(deadline, opaque)``
    whose entries for requests already answered are skipped when they reach the top.
    """

    __slots__ = ("_by_opaque", "_deadlines", "_rebuild_above", "unknown_responses")

    def __init__(self) -> None:
        self._by_opaque: dict[int, tuple[Waiter, float]] = {}
        self._deadlines: list[tuple[float, int]] = []
        self._rebuild_above = _STALE_SLACK  # heap size that calls for a rebuild
        # responses that matched no waiting request: late (already expired) or stray
        self.unknown_responses = 0

    def __len__(self) -> int:
        return len(self._by_opaque)

    def __contains__(self, opaque: object) -> bool:
        return opaque in self._by_opaque

    def add(self, opaque: int, waiter: Waiter, deadline: float) -> None:
        """Wait for the response to ``opaque`` until ``deadline`` (on the caller's clock)."""
        by_opaque = self._by_opaque
        if opaque in by_opaque:
            # two requests under one id: a response could not say which it answers
            raise LocalProtocolError(
                f"opaque {opaque} is already waiting for its response", opaque=opaque
            )
        by_opaque[opaque] = (waiter, deadline)
        deadlines = self._deadlines
        heapq.heappush(deadlines, (deadline, opaque))
        if len(deadlines) > self._rebuild_above:
            self._drop_stale()

    def complete(self, response: RemotingCommand) -> Waiter | None:
        """The waiter ``response`` answers, no longer pending; None when nobody waits."""
        entry = self._by_opaque.pop(response.opaque, None)
        if entry is None:
            self.unknown_responses += 1
            return None
        return entry[0]

    def discard(self, opaque: int) -> None:
        """Stop waiting for ``opaque`` (its waiter gave up); nothing if it is not pending."""
        self._by_opaque.pop(opaque, None)

    def expired(self, now: float) -> list[Waiter]:
        """The waiters whose deadline is at or before ``now``, earliest first; they are
        no longer pending."""
        due: list[Waiter] = []
        deadlines = self._deadlines
        by_opaque = self._by_opaque
        while deadlines and deadlines[0][0] <= now:
            deadline, opaque = heapq.heappop(deadlines)
            entry = by_opaque.get(opaque)
            if entry is not None and entry[1] == deadline:
                del by_opaque[opaque]
                due.append(entry[0])
        return due

    def next_deadline(self) -> float | None:
        """The earliest deadline of a pending request; None when none is pending."""
        deadlines = self._deadlines
        by_opaque = self._by_opaque
        while deadlines:
            deadline, opaque = deadlines[0]
            entry = by_opaque.get(opaque)
            if entry is not None and entry[1] == deadline:
                return deadline
            heapq.heappop(deadlines)
        return None

    def drain(self) -> list[Waiter]:
        """Every pending waiter, in the order they were added; nothing is pending after."""
        waiters = [waiter for waiter, _ in self._by_opaque.values()]
        self._by_opaque.clear()
        self._deadlines.clear()
        return waiters

    def _drop_stale(self) -> None:
        self._deadlines = [(deadline, opaque) for opaque, (_, deadline) in self._by_opaque.items()]
        heapq.heapify(self._deadlines)
        self._rebuild_above = _STALE_SLACK + _STALE_RATIO * len(self._deadlines)
