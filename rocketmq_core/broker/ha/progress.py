"""What a master knows of its slaves: connections, the acked offset, the sends waiting.

Sans-IO: a waiting send is a ``wake`` callable kept in a heap by the offset it waits
for; an ack calls, in offset order, every ``wake`` it satisfies. Nothing runs per send
while nobody waits.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

# timed-out waiters stay in the heap until an ack passes them; rebuild once they dominate
_REBUILD_AT_LEAST = 64


class ReplicaProgress:
    def __init__(self, fallbehind_max: int) -> None:
        self.fallbehind_max = fallbehind_max
        self.connections = 0
        self.acked = 0  # the highest CommitLog offset any slave reported; never decreases
        self._waiting: list[list] = []  # [end, sequence, wake | None], a heap by end
        self._sequence = itertools.count()
        self._abandoned = 0

    def slave_ok(self, end: int) -> bool:
        """A send ending at ``end`` may wait for a slave (HA.md §3 step 1)."""
        return self.connections > 0 and end - self.acked < self.fallbehind_max

    def ack(self, offset: int) -> None:
        """A slave reported ``offset``: wake every send it covers."""
        if offset <= self.acked:
            return
        self.acked = offset
        waiting = self._waiting
        while waiting and waiting[0][0] <= offset:
            entry = heapq.heappop(waiting)
            wake, entry[2] = entry[2], None
            if wake is None:
                self._abandoned -= 1
            else:
                wake()

    def wait(self, end: int, wake: Callable[[], None]) -> list:
        """Call ``wake`` once ``acked`` reaches ``end``; the entry returned abandons it."""
        entry = [end, next(self._sequence), wake]
        heapq.heappush(self._waiting, entry)
        return entry

    def abandon(self, entry: list) -> None:
        """The waiter gave up (its timeout): forget it."""
        if entry[2] is None:
            return
        entry[2] = None
        self._abandoned += 1
        if self._abandoned > _REBUILD_AT_LEAST and self._abandoned * 2 > len(self._waiting):
            self._waiting = [kept for kept in self._waiting if kept[2] is not None]
            heapq.heapify(self._waiting)
            self._abandoned = 0

    @property
    def waiting(self) -> int:
        """Sends waiting for an ack."""
        return len(self._waiting) - self._abandoned
