"""Orderly POP (POP.md §7): one batch of a queue in flight at a time, per group.

A queue a group popped orderly is blocked until every popped offset is acked or its
invisible time has passed; then the unacked offsets are popped again, in order, each
with its delivery count. The group's offset moves only over acked messages, so a broker
restart (which forgets this table) delivers the unacked ones again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QueueKey = tuple[str, str, int]  # (topic, group, queue id)


@dataclass(slots=True)
class _Inflight:
    offsets: list[int]
    attempt_id: str | None
    visible_at: dict[int, int]  # offset -> ms from which it may be popped again
    acked: set[int] = field(default_factory=set)

    def unacked(self) -> list[int]:
        return [offset for offset in self.offsets if offset not in self.acked]


class OrderTable:
    def __init__(self) -> None:
        self._inflight: dict[QueueKey, _Inflight] = {}
        self._counts: dict[QueueKey, dict[int, int]] = {}  # deliveries before, per offset

    def blocked(self, key: QueueKey, attempt_id: str | None, now_ms: int) -> bool:
        """A batch of the queue is out and still invisible (a retry of the same attempt
        is let through, to get that batch again)."""
        inflight = self._inflight.get(key)
        if inflight is None:
            return False
        if attempt_id is not None and attempt_id == inflight.attempt_id:
            return False
        return any(inflight.visible_at[offset] > now_ms for offset in inflight.unacked())

    def popped(
        self,
        key: QueueKey,
        offsets: list[int],
        attempt_id: str | None,
        now_ms: int,
        invisible_time: int,
    ) -> dict[int, int]:
        """Record a batch handed out; returns each offset's count of earlier deliveries."""
        counts = self._counts.setdefault(key, {})
        previous = self._inflight.get(key)
        for offset in offsets:
            if previous is not None and offset in previous.offsets:
                counts[offset] = counts.get(offset, 0) + 1
            else:
                counts.setdefault(offset, 0)
        self._inflight[key] = _Inflight(
            list(offsets), attempt_id, dict.fromkeys(offsets, now_ms + invisible_time)
        )
        return {offset: counts[offset] for offset in offsets}

    def ack(self, key: QueueKey, offset: int) -> int:
        """Mark ``offset`` acked; returns the offset the group may commit (-1: none yet)."""
        inflight = self._inflight.get(key)
        if inflight is None or offset not in inflight.offsets:
            return -1
        inflight.acked.add(offset)
        unacked = inflight.unacked()
        if unacked:
            return unacked[0]
        del self._inflight[key]
        counts = self._counts.get(key, {})
        for done in inflight.offsets:
            counts.pop(done, None)
        return inflight.offsets[-1] + 1

    def change_invisible(self, key: QueueKey, offset: int, visible_at: int) -> bool:
        inflight = self._inflight.get(key)
        if inflight is None or offset not in inflight.visible_at:
            return False
        inflight.visible_at[offset] = visible_at
        return True

    def inflight_offsets(self, key: QueueKey) -> list[int]:
        inflight = self._inflight.get(key)
        return inflight.unacked() if inflight is not None else []
