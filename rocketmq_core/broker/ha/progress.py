"""What a master knows of its slaves: connections, the acked offset, the sends waiting.

Sans-IO: a waiting send is a ``wake`` callable kept in a heap by the offset it waits
for and in a queue by its deadline; an ack calls ``wake(True)``, in offset order, for
every send it satisfies, ``expire`` calls ``wake(False)`` for those past their deadline.
Nothing runs per send while nobody waits, and no task or timer per waiting send: the
caller runs one timer over ``next_deadline`` (HAService).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections import deque
from collections.abc import Callable

log = logging.getLogger("rocketmq.broker.ha")

# waiters that timed out stay in the heap until an ack passes them; rebuild once they dominate
_REBUILD_AT_LEAST = 64

# an entry: [end, sequence, wake (None once woken), deadline]
_END, _WAKE, _DEADLINE = 0, 2, 3


class ReplicaProgress:
    def __init__(self, fallbehind_max: int) -> None:
        self.fallbehind_max = fallbehind_max
        self.connections = 0
        self.acked = 0  # the highest CommitLog offset any slave reported; never decreases
        self._waiting: list[list] = []  # a heap by end
        # the same entries by deadline: one timeout for all, so in the order they came
        self._deadlines: deque[list] = deque()
        self._sequence = itertools.count()
        self._expired = 0  # woken by expiry, still in the heap

    def slave_ok(self, end: int) -> bool:
        """A send ending at ``end`` may wait for a slave (HA.md §3 step 1)."""
        return self.connections > 0 and end - self.acked < self.fallbehind_max

    def ack(self, offset: int) -> None:
        """A slave reported ``offset``: wake every send it covers."""
        if offset <= self.acked:
            return
        self.acked = offset
        waiting = self._waiting
        while waiting and waiting[0][_END] <= offset:
            entry = heapq.heappop(waiting)
            wake, entry[_WAKE] = entry[_WAKE], None
            if wake is None:
                self._expired -= 1
            else:
                _call(wake, True)
        self._drop_woken()

    def wait(self, end: int, wake: Callable[[bool], None], deadline: float = math.inf) -> None:
        """Call ``wake(True)`` once ``acked`` reaches ``end``, or ``wake(False)`` from the
        first ``expire`` at or after ``deadline`` (the same clock as ``expire``'s)."""
        entry = [end, next(self._sequence), wake, deadline]
        heapq.heappush(self._waiting, entry)
        self._deadlines.append(entry)

    def next_deadline(self) -> float | None:
        """The earliest deadline of a send still waiting; None when none waits."""
        self._drop_woken()
        return self._deadlines[0][_DEADLINE] if self._deadlines else None

    def expire(self, now: float) -> None:
        """Wake with False every send whose deadline is ``now`` or earlier."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][_DEADLINE] <= now:
            entry = deadlines.popleft()
            wake, entry[_WAKE] = entry[_WAKE], None
            if wake is not None:
                self._expired += 1
                _call(wake, False)
        self._drop_woken()
        if self._expired > _REBUILD_AT_LEAST and self._expired * 2 > len(self._waiting):
            self._waiting = [kept for kept in self._waiting if kept[_WAKE] is not None]
            heapq.heapify(self._waiting)
            self._expired = 0

    def _drop_woken(self) -> None:
        # acks come in about the order the sends waited: the woken ones leave from the front
        deadlines = self._deadlines
        while deadlines and deadlines[0][_WAKE] is None:
            deadlines.popleft()

    @property
    def waiting(self) -> int:
        """Sends waiting for an ack."""
        return len(self._waiting) - self._expired


def _call(wake: Callable[[bool], None], acked: bool) -> None:
    """One waiter's wake: a failing one is logged, the others are still woken (an ack or
    the timer must never stop part-way)."""
    try:
        wake(acked)
    except Exception:
        log.exception("a send waiting for a slave could not be answered")
