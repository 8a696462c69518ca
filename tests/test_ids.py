"""UNIQ_KEY ids: Java's MessageClientIDSetter layout (docs/spec/MESSAGE.md §5.2)."""

from __future__ import annotations

import calendar

from rocketmq_core.protocol.ids import UniqueIdGenerator

IP = bytes([127, 0, 0, 1])
NOV_2026 = calendar.timegm((2026, 11, 1, 0, 0, 0)) * 1000
DEC_2026 = calendar.timegm((2026, 12, 1, 0, 0, 0)) * 1000


def test_the_layout_ip_pid_salt_time_counter() -> None:
    ids = UniqueIdGenerator(IP, pid=0x12345, salt=0x0ABCDEF0)
    now = NOV_2026 + 26 * 86_400_000 + 1234
    first, second = ids.next(now), ids.next(now)
    assert len(first) == 32 and first == first.upper()
    assert first[:20] == "7F000001" + "2345" + "0ABCDEF0"  # ip, the pid's low 16 bits, salt
    assert first[20:28] == f"{now - NOV_2026:08X}"  # ms since the month began
    assert int(second[28:], 16) == (int(first[28:], 16) + 1) & 0xFFFF  # the counter


def test_ids_of_one_millisecond_and_of_the_next_differ() -> None:
    ids = UniqueIdGenerator(IP, pid=1, salt=1)
    now = NOV_2026 + 5
    made = [ids.next(now) for _ in range(1000)] + [ids.next(now + 1) for _ in range(1000)]
    assert len(set(made)) == 2000
    assert {made[0][20:28], made[-1][20:28]} == {f"{5:08X}", f"{6:08X}"}


def test_the_time_restarts_with_each_month() -> None:
    ids = UniqueIdGenerator(IP, pid=1, salt=1)
    assert ids.next(DEC_2026 - 1)[20:28] == f"{DEC_2026 - 1 - NOV_2026:08X}"
    assert ids.next(DEC_2026)[20:28] == "00000000"
    assert ids.next(DEC_2026 + 7)[20:28] == "00000007"
