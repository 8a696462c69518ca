"""Latency fault tolerance: keep sending away from a broker that was slow or failed.

Java's MQFaultStrategy: a send that took at least ``LATENCY_STEPS[i]`` seconds makes
its broker unavailable for ``ISOLATION[i]``; a failed send counts as 3 s (30 s out).
"""

from __future__ import annotations

import bisect

LATENCY_STEPS = (0.05, 0.1, 0.55, 1.0, 2.0, 3.0, 15.0)
ISOLATION = (0.0, 0.0, 30.0, 60.0, 120.0, 180.0, 600.0)
FAILED_LATENCY = 3.0


class LatencyFaultTolerance:
    def __init__(self) -> None:
        self._available_at: dict[str, float] = {}

    def record(self, broker_name: str, latency: float, now: float, *, failed: bool = False) -> None:
        if not failed and latency < LATENCY_STEPS[2] and not self._available_at:
            return  # the usual send: quick, and no broker is kept away
        latency = FAILED_LATENCY if failed else latency
        step = bisect.bisect_right(LATENCY_STEPS, latency) - 1
        isolation = ISOLATION[step] if step >= 0 else 0.0
        if isolation:
            self._available_at[broker_name] = now + isolation
        else:
            self._available_at.pop(broker_name, None)

    def keeps_any_away(self, now: float) -> bool:
        """Whether a broker is kept away at ``now``. Once every one's time has run out the
        table forgets them: a broker that left the route gets no quick send to clear it."""
        available_at = self._available_at
        if available_at and max(available_at.values()) <= now:
            available_at.clear()
        return bool(available_at)

    def available(self, broker_name: str, now: float) -> bool:
        return self._available_at.get(broker_name, 0.0) <= now
