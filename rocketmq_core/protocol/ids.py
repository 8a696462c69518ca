"""Client unique message ids (the ``UNIQ_KEY`` property, MESSAGE.md §5.2).

The layout follows Java's MessageClientIDSetter: ip, pid, a per-process random
number, milliseconds since the start of the month, a counter; upper hex. Brokers and
clients treat the id as an opaque string; the layout only makes ids from different
processes and restarts distinct. The caller passes ``now``: no clock here.
"""

from __future__ import annotations

import calendar
import itertools
import os
import random
import struct
from datetime import UTC, datetime

_STRUCT_V4 = struct.Struct(">4sHiih")  # ip, pid, random, ms since the month began, counter


def _month_start_ms(now_ms: int) -> int:
    moment = datetime.fromtimestamp(now_ms / 1000, UTC)
    return calendar.timegm((moment.year, moment.month, 1, 0, 0, 0)) * 1000


class UniqueIdGenerator:
    """Makes ``UNIQ_KEY`` values: 32 hex digits, unique per process and call."""

    def __init__(self, ip: bytes, pid: int | None = None, salt: int | None = None) -> None:
        if len(ip) != 4:
            raise ValueError(f"an IPv4 address is 4 bytes, got {len(ip)}")
        pid = os.getpid() if pid is None else pid
        salt = random.getrandbits(31) if salt is None else salt
        # the first 10 bytes never change: ip, pid, salt
        # the pid's low 16 bits: the bytes Java's (short) cast leaves
        self._prefix = _STRUCT_V4.pack(ip, pid & 0xFFFF, salt, 0, 0)[:10].hex().upper()
        self._counter = itertools.count(random.getrandbits(15))
        self._month_start = 0
        self._month_end = 0
        # the id's first 28 digits, made once per millisecond: sends share them
        self._head_ms: int | None = None
        self._head = ""

    def next(self, now_ms: int) -> str:
        if now_ms != self._head_ms:
            if not self._month_start <= now_ms < self._month_end:
                self._month_start = _month_start_ms(now_ms)
                self._month_end = _next_month_start_ms(self._month_start)
            elapsed = now_ms - self._month_start
            self._head = f"{self._prefix}{elapsed & 0xFFFFFFFF:08X}"
            self._head_ms = now_ms
        return self._head + "%04X" % (next(self._counter) & 0xFFFF)


def _next_month_start_ms(month_start_ms: int) -> int:
    moment = datetime.fromtimestamp(month_start_ms / 1000, UTC)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return calendar.timegm((year, month, 1, 0, 0, 0)) * 1000
