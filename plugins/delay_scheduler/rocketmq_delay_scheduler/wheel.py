"""The timer service's bookkeeping, without I/O or clock: which timers are due when, and
which entries of the timer queue are finished.

``TimerWheel`` keeps pending timers as queue offsets of rmq_sys_wheel_timer in slots of
``precision_ms``; a timer due at ``t`` goes to the slot that ends at or after ``t``, so
it is never delivered early and at most one slot late. Eight bytes per pending timer.

``DoneLog`` is a bitmap of finished queue offsets (delivered, recalled, rolled) from a
base below which all are finished. It is what survives a restart: the service reads
the timer queue again from the base and skips what is done.
"""

from __future__ import annotations

import heapq
import struct
from array import array

_BASE = struct.Struct(">q")


class TimerWheel:
    def __init__(self, precision_ms: int) -> None:
        self.precision_ms = precision_ms
        self._slots: dict[int, array] = {}
        self._order: list[int] = []  # a heap of the slots in use
        self._pending = 0

    def __len__(self) -> int:
        return self._pending

    def add(self, due_ms: int, queue_offset: int) -> None:
        slot = -(-due_ms // self.precision_ms)  # rounded up: never early
        entries = self._slots.get(slot)
        if entries is None:
            entries = self._slots[slot] = array("q")
            heapq.heappush(self._order, slot)
        entries.append(queue_offset)
        self._pending += 1

    def next_due(self) -> int | None:
        """When the earliest slot is due (ms), None when nothing waits."""
        return self._order[0] * self.precision_ms if self._order else None

    def pop_due(self, now_ms: int) -> list[int]:
        """The queue offsets of the earliest slot if it is due by ``now_ms``, else []."""
        if not self._order or self._order[0] * self.precision_ms > now_ms:
            return []
        entries = self._slots.pop(heapq.heappop(self._order))
        self._pending -= len(entries)
        return entries.tolist()


class DoneLog:
    def __init__(self, base: int = 0, bits: bytes = b"") -> None:
        self.base = base
        self._bits = bytearray(bits)
        self.changed = False

    def is_done(self, offset: int) -> bool:
        if offset < self.base:
            return True
        index = offset - self.base
        byte = index >> 3
        return byte < len(self._bits) and bool(self._bits[byte] & (1 << (index & 7)))

    def mark(self, offset: int) -> None:
        index = offset - self.base
        if index < 0:
            return
        byte = index >> 3
        if byte >= len(self._bits):
            self._bits.extend(bytes(byte + 1 - len(self._bits)))
        self._bits[byte] |= 1 << (index & 7)
        self.changed = True

    def forget_below(self, offset: int) -> None:
        """Count every offset below ``offset`` as finished."""
        drop = (offset - self.base) >> 3
        if drop > 0:
            del self._bits[:drop]
            self.base += drop * 8
            self.changed = True
        for below in range(self.base, offset):
            self.mark(below)

    def compact(self) -> None:
        """Move the base past the leading run of whole finished bytes."""
        whole = 0
        for value in self._bits:
            if value != 0xFF:
                break
            whole += 1
        if whole:
            del self._bits[:whole]
            self.base += whole * 8

    def encode(self) -> bytes:
        self.compact()
        return _BASE.pack(self.base) + bytes(self._bits)

    @classmethod
    def decode(cls, data: bytes) -> DoneLog:
        """ValueError when ``data`` is not an encoded DoneLog."""
        if len(data) < _BASE.size:
            raise ValueError(f"{len(data)} bytes: too short for a timer progress file")
        (base,) = _BASE.unpack_from(data)
        if base < 0:
            raise ValueError(f"the base offset {base} is negative")
        return cls(base, data[_BASE.size :])
