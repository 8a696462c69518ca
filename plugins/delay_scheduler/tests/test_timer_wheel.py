"""The timer wheel and its done log, without I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq_delay_scheduler.wheel import DoneLog, TimerWheel


def test_a_timer_is_never_due_before_its_time_and_at_most_one_slot_after():
    wheel = TimerWheel(precision_ms=100)
    wheel.add(1_050, 7)
    assert wheel.pop_due(1_049) == []
    assert wheel.pop_due(1_099) == []
    assert wheel.next_due() == 1_100
    assert wheel.pop_due(1_100) == [7]
    assert len(wheel) == 0 and wheel.next_due() is None


def test_slots_come_due_in_time_order_whatever_the_order_of_adding():
    wheel = TimerWheel(precision_ms=10)
    for offset, due in enumerate([500, 100, 300, 100, 200]):
        wheel.add(due, offset)
    fired = []
    while (entries := wheel.pop_due(10_000)) != []:
        fired.append(entries)
    assert fired == [[1, 3], [4], [2], [0]]


@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=200))
def test_every_timer_comes_due_exactly_once_and_never_early(dues):
    wheel = TimerWheel(precision_ms=37)
    for offset, due in enumerate(dues):
        wheel.add(due, offset)
    seen = []
    now = 0
    while len(wheel):
        now = wheel.next_due()
        for offset in wheel.pop_due(now):
            assert dues[offset] <= now < dues[offset] + 37
            seen.append(offset)
    assert sorted(seen) == list(range(len(dues)))


def test_the_done_log_moves_its_base_past_whole_finished_bytes_and_survives_encoding():
    done = DoneLog()
    for offset in [*range(16), 17, 20]:
        done.mark(offset)
    restored = DoneLog.decode(done.encode())
    assert restored.base == 16
    assert [restored.is_done(offset) for offset in range(15, 22)] == [
        True,  # below the base
        False,
        True,
        False,
        False,
        True,
        False,
    ]


def test_forgetting_below_an_offset_counts_everything_before_it_done():
    done = DoneLog(base=0)
    done.mark(30)
    done.forget_below(21)
    assert all(done.is_done(offset) for offset in range(21))
    assert not done.is_done(21) and done.is_done(30)
    assert done.changed


@pytest.mark.parametrize("data", [b"", b"\x00" * 7, b"\xff" * 8])
def test_a_garbled_progress_file_is_a_value_error(data):
    with pytest.raises(ValueError):
        DoneLog.decode(data)
