"""How fast each consumer group pulls each topic: the ``consumeTps`` of GET_CONSUME_STATS.

Like Java's stats manager (GROUP_GET_NUMS), the rate is the messages a group pulled in
the last minute, divided by 60: 30 messages pulled just now read 0.50, and the rate
falls back to 0 a minute after the group stops.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

WINDOW_SECONDS = 60


class PullRates:
    """Messages pulled per (group, topic), counted in one-second buckets."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, window: int = WINDOW_SECONDS
    ) -> None:
        self.clock = clock
        self.window = window
        self._buckets: dict[tuple[str, str], deque[list[int]]] = {}  # [second, messages]

    def record(self, group: str, topic: str, messages: int) -> None:
        if messages <= 0:
            return
        second = int(self.clock())
        buckets = self._buckets.get((group, topic))
        if buckets is None:
            buckets = self._buckets[(group, topic)] = deque()
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] += messages
        else:
            buckets.append([second, messages])
            self._drop_old(buckets, second)

    def tps(self, group: str, topics: Iterable[str]) -> float:
        """Messages per second that ``group`` pulled from ``topics`` over the window."""
        now = int(self.clock())
        total = 0
        for topic in topics:
            buckets = self._buckets.get((group, topic))
            if buckets is None:
                continue
            self._drop_old(buckets, now)
            if not buckets:
                del self._buckets[(group, topic)]  # an idle group costs nothing
                continue
            total += sum(messages for _, messages in buckets)
        return total / self.window

    def _drop_old(self, buckets: deque[list[int]], now: int) -> None:
        while buckets and buckets[0][0] <= now - self.window:
            buckets.popleft()
