"""The timer checkpoint a slave asks its master for (GET_TIMER_CHECK_POINT, 60), without I/O.

The body starts with RocketMQ 5's TimerCheckpoint: seven big-endian int64s, lastReadTimeMs,
lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset, then the DataVersion
(stateVersion, timestamp, counter). A Java slave reads those and ignores the rest.

Our timer keeps no timer log; its progress is a ``DoneLog`` (finished timer-queue offsets),
and that is what a promoted slave needs to resume where its master was. So our master
sends the encoded DoneLog after the 56 bytes. A Java master sends the 56 bytes alone: its
queue offsets count what it moved into its timer log, not what it delivered, so they say
nothing a Python slave may skip.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_OFFSETS = struct.Struct(">4q")  # the part every version sends
_VERSION = struct.Struct(">3q")  # DataVersion, added in 5.1
JAVA_SIZE = _OFFSETS.size + _VERSION.size  # 56


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    last_read_time_ms: int  # every timer due before it is finished
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int = 0
    timestamp: int = 0  # ms of the last change
    counter: int = 0  # changes so far
    progress: bytes | None = None  # an encoded DoneLog; None from a Java master

    def encode(self) -> bytes:
        return (
            _OFFSETS.pack(
                self.last_read_time_ms,
                self.last_timer_log_flush_pos,
                self.last_timer_queue_offset,
                self.master_timer_queue_offset,
            )
            + _VERSION.pack(self.state_version, self.timestamp, self.counter)
            + (self.progress or b"")
        )

    @classmethod
    def decode(cls, data: bytes) -> TimerCheckpoint:
        """ValueError when ``data`` is not a timer checkpoint."""
        if len(data) != _OFFSETS.size and len(data) < JAVA_SIZE:
            raise ValueError(
                f"{len(data)} bytes: a timer checkpoint has {_OFFSETS.size} or at least {JAVA_SIZE}"
            )
        read_time, flush_pos, queue_offset, master_offset = _OFFSETS.unpack_from(data)
        state, timestamp, counter = (
            _VERSION.unpack_from(data, _OFFSETS.size) if len(data) >= JAVA_SIZE else (0, 0, 0)
        )
        return cls(
            read_time,
            flush_pos,
            queue_offset,
            master_offset,
            state,
            timestamp,
            counter,
            progress=data[JAVA_SIZE:] or None,
        )
