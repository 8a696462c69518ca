"""A log line at most once an interval for one kind of event, with a count: used where a
client, a full disk or a missing directory could otherwise write a line per event."""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    """At most one line per ``interval`` seconds for one kind of event, with the count of
    events since the last line: a flood of refused clients cannot flood the log."""

    __slots__ = ("_interval", "_last", "_logger", "_suppressed")

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self._logger = logger
        self._interval = interval
        self._last = -interval
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < self._interval:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more since the last such line)"
        self._logger.warning(message, *args)
        self._last = now
        self._suppressed = 0
