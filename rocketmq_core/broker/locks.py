"""Queue locks for orderly consumers (CODES.md §4.8): a queue of a group belongs to one
client at a time, until that client unlocks it or stops renewing it for 60 s.

Sans-IO: callers pass the time, in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.heartbeat import MessageQueue

LOCK_MAX_LIVE_MS = 60_000.0  # rocketmq.broker.rebalance.lockMaxLiveTime


@dataclass(slots=True)
class QueueLock:
    client_id: str
    renewed_at: float


class QueueLockTable:
    def __init__(self, max_live_ms: float = LOCK_MAX_LIVE_MS) -> None:
        self.max_live_ms = max_live_ms
        self._locks: dict[str, dict[MessageQueue, QueueLock]] = {}

    def lock(
        self, group: str, client_id: str, queues: list[MessageQueue], now: float
    ) -> list[MessageQueue]:
        """Lock or renew each queue that is free, expired or already ``client_id``'s;
        returns those ``client_id`` now holds, in the order asked."""
        locks = self._locks.setdefault(group, {})
        held = []
        for queue in queues:
            current = locks.get(queue)
            if current is None or current.client_id == client_id or self._expired(current, now):
                locks[queue] = QueueLock(client_id, now)
                held.append(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: list[MessageQueue]) -> None:
        locks = self._locks.get(group)
        if not locks:
            return
        for queue in queues:
            current = locks.get(queue)
            if current is not None and current.client_id == client_id:
                del locks[queue]
        if not locks:
            del self._locks[group]

    def holder(self, group: str, queue: MessageQueue, now: float) -> str | None:
        """The client holding ``queue`` for ``group``, if its lock is alive."""
        current = self._locks.get(group, {}).get(queue)
        if current is None or self._expired(current, now):
            return None
        return current.client_id

    def _expired(self, lock: QueueLock, now: float) -> bool:
        return now - lock.renewed_at > self.max_live_ms
