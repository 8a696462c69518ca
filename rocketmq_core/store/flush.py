"""Flush policies: pure decisions of when to make appended bytes durable (STORE.md §10).

A policy reads no clock and does no I/O: the store's Flusher asks it, with the
numbers, whether to flush now or how long to wait. Built-ins ``async`` and ``sync`` are
registered through ``rocketmq_register_flush_policies`` and chosen by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .api import StoreConfig

PAGE_SIZE = 4096


class FlushPolicy(Protocol):
    # read-only (properties), so that a frozen dataclass is a FlushPolicy
    @property
    def name(self) -> str: ...

    # puts wait until their bytes are durable (group commit), up to ``timeout`` seconds
    @property
    def waits(self) -> bool: ...

    @property
    def timeout(self) -> float: ...

    def delay(self, dirty_bytes: int, since_last_flush: float, waiters: int) -> float:
        """Seconds until the next flush; 0 means flush now."""


@dataclass(frozen=True)
class AsyncFlush:
    """Flush in the background, as Java's flush service does with flushCommitLogTimed
    (the default since 4.9): at most once an ``interval``, when ``least_bytes`` are
    dirty, and whatever is dirty once ``thorough_interval`` has passed since the last
    flush. Puts return after the append. Flushing each time a few pages are dirty would
    cost a worker-thread round trip and an fdatasync every few puts under load (~2 us a
    put on one core) and make no byte durable much sooner."""

    interval: float = 0.5
    least_bytes: int = 4 * PAGE_SIZE
    thorough_interval: float = 10.0
    name: str = "async"
    waits: bool = False
    timeout: float = 0.0

    def delay(self, dirty_bytes: int, since_last_flush: float, waiters: int) -> float:
        if dirty_bytes <= 0:
            return self.interval
        if dirty_bytes >= self.least_bytes:
            return max(0.0, self.interval - since_last_flush)
        return min(self.interval, max(0.0, self.thorough_interval - since_last_flush))

    @classmethod
    def from_config(cls, config: StoreConfig) -> AsyncFlush:
        return cls(
            config.flush_interval,
            config.flush_least_pages * PAGE_SIZE,
            config.flush_thorough_interval,
        )


@dataclass(frozen=True)
class SyncFlush:
    """Group commit: a put returns once a flush covers it; the puts that arrive while one
    flush runs share the next. Past ``timeout`` the put answers FLUSH_DISK_TIMEOUT."""

    timeout: float = 5.0
    idle_interval: float = 1.0  # dirty bytes of puts that did not wait (WAIT=false)
    name: str = "sync"
    waits: bool = True

    def delay(self, dirty_bytes: int, since_last_flush: float, waiters: int) -> float:
        if waiters:
            return 0.0
        return (
            self.idle_interval
            if dirty_bytes <= 0
            else max(0.0, self.idle_interval - since_last_flush)
        )

    @classmethod
    def from_config(cls, config: StoreConfig) -> SyncFlush:
        return cls(timeout=config.sync_flush_timeout)
