"""GET_TIMER_CHECK_POINT's body, without I/O: RocketMQ 5's 56 bytes, then our progress."""

from __future__ import annotations

import struct

import pytest
from rocketmq_delay_scheduler.checkpoint import JAVA_SIZE, TimerCheckpoint
from rocketmq_delay_scheduler.wheel import DoneLog


def test_the_first_56_bytes_are_javas_layout_and_our_progress_follows():
    done = DoneLog(16)
    done.mark(17)
    fields = (1_700_000_000_000, 0, 16, 16, 0, 1_700_000_000_500, 3)
    body = TimerCheckpoint(*fields, progress=done.encode()).encode()
    assert struct.unpack_from(">7q", body) == fields  # what a Java slave reads
    decoded = TimerCheckpoint.decode(body)
    assert decoded.progress == body[JAVA_SIZE:]
    restored = DoneLog.decode(decoded.progress)
    assert restored.is_done(15) and restored.is_done(17) and not restored.is_done(16)


def test_a_java_masters_body_carries_no_progress():
    java = struct.pack(">7q", 1_700_000_000_000, 4096, 9, 9, 0, 1_700_000_000_500, 1)
    assert TimerCheckpoint.decode(java).progress is None
    # before DataVersion was added (5.0) the body had the four offsets only
    older = TimerCheckpoint.decode(java[:32])
    assert (older.master_timer_queue_offset, older.counter, older.progress) == (9, 0, None)


@pytest.mark.parametrize("size", [0, 8, 31, 33, 55])
def test_a_body_of_another_size_is_a_value_error(size):
    with pytest.raises(ValueError, match=f"{size} bytes: a timer checkpoint has 32 or at least 56"):
        TimerCheckpoint.decode(bytes(size))
