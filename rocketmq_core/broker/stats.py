"""Broker statistics as Java keeps them (METRICS.md §2, §3.1): BrokerStatsManager's
items and StoreStatsService's store-wide rates.

Sans-IO: the send and pull paths bump plain counters (a dict lookup and a few integer
adds, no lock, no clock), and ``tick(now_ms)``, called about once a second by
``sample_periodically``, takes the snapshots the rates are computed from:

* each item (TOPIC_PUT_NUMS of a topic, GROUP_GET_NUMS of ``topic@group``...) every 10 s
  (7 kept: the minute), every 10 min (7: the hour) and every hour (25: the day); a
  window's sum is its last value less its first, tps that sum per second, avgpt the sum
  per call;
* the store's puts, found and missed gets and transferred messages every second (601
  kept), for the runtime info's ``putTps`` and friends over 10, 60 and 600 samples;
* the put and get totals at local midnight (``msgPutTotalTodayMorning``...).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import anyio

from ..metrics.histograms import BucketCounts
from ..protocol.bodies import BrokerStatsData, BrokerStatsItem
from ..protocol.constants import GROUP_GET_NUMS, TOPIC_PUT_NUMS
from ..protocol.message import (
    FIXED_SIZE,
    HOST_V4_SIZE,
    HOST_V6_SIZE,
    MAX_V1_TOPIC_LENGTH,
    record_size,
)
from ..store.api import GetResult, GetStatus, MessageToStore, PutResult, PutStatus

log = logging.getLogger("rocketmq.broker")

TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"  # key: topic; value: stored bytes
GROUP_GET_SIZE = "GROUP_GET_SIZE"  # key: topic@group; value: bytes
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"  # key: original topic@group; value: messages sent back
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"  # key: the cluster name; value only (avgpt 0)
BROKER_GET_NUMS = "BROKER_GET_NUMS"  # key: the cluster name; value only

SAMPLE_INTERVAL = 1.0  # seconds between ticks (Java's StoreStatsService samples each second)
STORE_SAMPLES = 601  # 600 one-second intervals: the last part of putTps
STORE_RATE_SPANS = (10, 60, 600)  # samples the three parts of putTps cover


@dataclass(frozen=True, slots=True)
class Window:
    interval_ms: int
    keep: int


MINUTE = Window(10_000, 7)
HOUR = Window(600_000, 7)
DAY = Window(3_600_000, 25)
WINDOWS = (MINUTE, HOUR, DAY)


class Snapshots:
    """One window of one item: (time ms, calls, value) at each sampling, oldest first."""

    __slots__ = ("points", "window")

    def __init__(self, window: Window) -> None:
        self.window = window
        self.points: deque[tuple[int, int, int]] = deque(maxlen=window.keep)

    def take(self, now_ms: int, calls: int, value: int) -> None:
        if not self.points:  # as Java: nothing counted one interval before the first
            self.points.append((now_ms - self.window.interval_ms, 0, 0))
        self.points.append((now_ms, calls, value))

    def rate(self) -> BrokerStatsItem:
        if not self.points:
            return BrokerStatsItem()
        first_ms, first_calls, first_value = self.points[0]
        last_ms, last_calls, last_value = self.points[-1]
        total = last_value - first_value
        elapsed = last_ms - first_ms
        tps = total * 1000.0 / elapsed if elapsed > 0 else 0.0
        calls = last_calls - first_calls
        return BrokerStatsItem(total, tps, total / calls if calls > 0 else 0.0)


class StatsItem:
    """A statistic of one key (StatsItem): its minute, hour and day windows."""

    __slots__ = ("day", "hour", "minute")

    def __init__(self) -> None:
        self.minute, self.hour, self.day = (Snapshots(w) for w in WINDOWS)

    def data(self) -> BrokerStatsData:
        return BrokerStatsData(self.minute.rate(), self.hour.rate(), self.day.rate())


# each statistic: the counter table it reads, and where its value and calls are in a row
_VALUE, _CALLS, _BYTES = 0, 1, 2
_SOURCES = {
    TOPIC_PUT_NUMS: ("puts", _VALUE),
    TOPIC_PUT_SIZE: ("puts", _BYTES),
    GROUP_GET_NUMS: ("gets", _VALUE),
    GROUP_GET_SIZE: ("gets", _BYTES),
    SNDBCK_PUT_NUMS: ("send_backs", _VALUE),
    BROKER_PUT_NUMS: ("broker_puts", _VALUE),
    BROKER_GET_NUMS: ("broker_gets", _VALUE),
}
STATS_NAMES = tuple(_SOURCES)

# the store-wide counters sampled each second, in the order of a sample's fields
_PUTS, _FOUND, _MISSED, _TRANSFERRED = range(1, 5)


class BrokerStats:
    """The counters of one broker and the snapshots its rates are computed from."""

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self.store_host_v6 = False
        # rows [messages, calls, bytes]; keyed by topic (puts), topic@group (the others)
        self.puts: dict[str, list[int]] = {}
        self.gets: dict[str, list[int]] = {}
        self.send_backs: dict[str, list[int]] = {}
        self.dead_letters: dict[tuple[str, str], int] = {}  # (group, first topic): messages
        # stored sizes per topic, counted only while a metrics exporter reads them
        self.message_sizes: BucketCounts | None = None
        self._broker_puts = [0, 0, 0]
        self._broker_gets = [0, 0, 0]
        self.broker_puts = {cluster_name: self._broker_puts}
        self.broker_gets = {cluster_name: self._broker_gets}
        # store-wide (StoreStatsService): every stored message, every read of the store
        self.stored_messages = 0
        self.stored_bytes = 0
        self.put_failures = 0
        self.gets_found = 0
        self.gets_missed = 0
        self.transferred = 0
        self._items: dict[str, dict[str, StatsItem]] = {name: {} for name in _SOURCES}
        self._store_samples: deque[tuple[int, int, int, int, int]] = deque(maxlen=STORE_SAMPLES)
        self._due = {window: 0 for window in WINDOWS}  # when each window samples next
        self._day: tuple[int, int, int] | None = None  # the local date of the last tick
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0

    @property
    def store_host_v6(self) -> bool:
        """The store host's family: an IPv6 one takes 12 more bytes in every record."""
        return self._record_fixed_size == FIXED_SIZE + HOST_V6_SIZE

    @store_host_v6.setter
    def store_host_v6(self, v6: bool) -> None:
        # a record's size without its born host, topic, body and properties
        self._record_fixed_size = FIXED_SIZE + (HOST_V6_SIZE if v6 else HOST_V4_SIZE)

    # --- counting: the send and pull paths ------------------------------------------------

    def count_put(self, message: MessageToStore, result: PutResult) -> None:
        """A client's message put (SEND_MESSAGE): counted under the topic it is stored in.

        Every single send runs it: ``_put`` and ``stored_size`` are written out here (one
        call instead of four, ~0.5 us a send)."""
        status = result.status
        if status is not PutStatus.PUT_OK and not status.stored:  # `is` first: ~0.3 us less
            self.put_failures += 1
            return
        topic = message.topic
        topic_length = len(topic)
        size = (
            self._record_fixed_size
            + (HOST_V6_SIZE if len(message.born_host) > HOST_V4_SIZE else HOST_V4_SIZE)
            + (1 if topic_length <= MAX_V1_TOPIC_LENGTH else 2)
            + topic_length
            + len(message.body)
            + len(message.properties)
        )
        row = self.puts.get(topic)
        if row is None:
            row = self.puts[topic] = [0, 0, 0]
        row[0] += 1
        row[1] += 1
        row[2] += size
        self._broker_puts[0] += 1
        self.stored_messages += 1
        self.stored_bytes += size
        if self.message_sizes is not None:
            self.message_sizes.add(topic, size, 1)

    def fixed_record_size(self, born_host_size: int) -> int:
        """A CommitLog record's bytes but for its topic (and its length), body and
        properties, as ``count_put`` counts them."""
        return self._record_fixed_size + born_host_size

    def count_put_runs(self, counts: dict[tuple[str, int], int]) -> None:
        """Single sends stored by a run of them (send_frames): messages by topic and
        record size, each counted as ``count_put`` counts one."""
        for (topic, size), messages in counts.items():
            self._put(topic, messages, size * messages, requests=messages)

    def count_put_batches(self, batches: list[tuple[str, int, int]]) -> None:
        """Batches stored by a run of sends (send_frames): (topic, messages, record bytes)
        of each, counted as ``count_put_batch`` counts one."""
        for topic, messages, size in batches:
            self._put(topic, messages, size)

    def count_put_batch(self, messages: list[MessageToStore], result: PutResult) -> None:
        """A batch put (SEND_BATCH_MESSAGE): its messages in one call, as Java counts it."""
        status = result.status
        if status is not PutStatus.PUT_OK and not status.stored:
            self.put_failures += 1
            return
        # one request's records share their topic and born host: only the body and the
        # properties differ in size from one record to the next
        first = messages[0]
        fixed = record_size(0, len(first.topic), 0, len(first.born_host) > 8, self.store_host_v6)
        size = fixed * len(messages) + sum([len(m.body) + len(m.properties) for m in messages])
        self._put(first.topic, len(messages), size)

    def stored_size(self, message: MessageToStore) -> int:
        """The bytes of the CommitLog record of ``message`` (Java's wroteBytes); topic
        names are ASCII (topic_problem), so their length in bytes is len()."""
        return record_size(
            len(message.body),
            len(message.topic),
            len(message.properties),
            len(message.born_host) > 8,
            self.store_host_v6,
        )

    def _put(self, topic: str, messages: int, size: int, requests: int = 1) -> None:
        """``messages`` stored by ``requests`` sends (a batch is one), ``size`` bytes."""
        row = self.puts.get(topic)
        if row is None:
            row = self.puts[topic] = [0, 0, 0]
        row[0] += messages
        row[1] += requests
        row[2] += size
        self._broker_puts[0] += messages
        self.stored_messages += messages
        self.stored_bytes += size
        if self.message_sizes is not None:
            self.message_sizes.add(topic, size / messages, messages)

    def count_stored(self, message: MessageToStore, result: PutResult) -> None:
        """A message the broker put itself (a send-back, a delay delivery, a commit): the
        store's totals only, as Java's store counts every put."""
        if not result.status.stored:
            self.put_failures += 1
            return
        self.stored_messages += 1
        self.stored_bytes += self.stored_size(message)

    def count_get(self, group: str, topic: str, result: GetResult) -> None:
        """A read of the store for a pull: found or missed, and what a found one returned."""
        if result.status is not GetStatus.FOUND:
            self.gets_missed += 1
            return
        self.gets_found += 1
        records = result.records
        messages = len(records)
        size = sum(map(len, records))
        key = f"{topic}@{group}"
        row = self.gets.get(key)
        if row is None:
            row = self.gets[key] = [0, 0, 0]
        row[0] += messages
        row[1] += 1
        row[2] += size
        self._broker_gets[0] += messages
        self.transferred += messages

    def count_send_back(self, group: str, topic: str) -> None:
        """A message a consumer sent back (CONSUMER_SEND_MSG_BACK), under its first topic."""
        key = f"{topic}@{group}"
        row = self.send_backs.get(key)
        if row is None:
            row = self.send_backs[key] = [0, 0, 0]
        row[0] += 1
        row[1] += 1

    def count_dead_letter(self, group: str, topic: str) -> None:
        """A message moved to the group's dead-letter queue, under its first topic."""
        key = (group, topic)
        self.dead_letters[key] = self.dead_letters.get(key, 0) + 1

    def value(self, name: str, key: str) -> int:
        """The running total of statistic ``name`` for ``key`` (0 when never counted)."""
        table, at = _SOURCES[name]
        row = getattr(self, table).get(key)
        return row[at] if row is not None else 0

    # --- sampling ----------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Take the snapshots due at ``now_ms`` (wall-clock ms); call about once a second."""
        self._store_samples.append(
            (now_ms, self.stored_messages, self.gets_found, self.gets_missed, self.transferred)
        )
        for window in WINDOWS:
            if now_ms >= self._due[window]:
                self._sample(window, now_ms)
                due = self._due[window] + window.interval_ms
                self._due[window] = due if due > now_ms else now_ms + window.interval_ms
        self._roll_day(now_ms)

    def _sample(self, window: Window, now_ms: int) -> None:
        which = WINDOWS.index(window)
        for name, (table, at) in _SOURCES.items():
            items = self._items[name]
            for key, row in getattr(self, table).items():
                item = items.get(key)
                if item is None:
                    item = items[key] = StatsItem()
                (item.minute, item.hour, item.day)[which].take(now_ms, row[_CALLS], row[at])

    def _roll_day(self, now_ms: int) -> None:
        """At the first tick of a new local day, the totals become this morning's (and
        this morning's yesterday's), as Java's BrokerStats records them at midnight."""
        local = time.localtime(now_ms / 1000)
        day = (local.tm_year, local.tm_mon, local.tm_mday)
        if self._day is not None and day != self._day:
            self.put_yesterday_morning = self.put_today_morning
            self.get_yesterday_morning = self.get_today_morning
            self.put_today_morning = self.stored_messages
            self.get_today_morning = self.transferred
        self._day = day

    # --- reading -----------------------------------------------------------------------

    def data(self, name: str, key: str) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA: the windows of ``name`` for ``key``; None when there is no
        such item (never counted, or not sampled yet)."""
        items = self._items.get(name)
        item = items.get(key) if items is not None else None
        return item.data() if item is not None else None

    def minute_tps(self, name: str, key: str) -> float:
        item = self._items[name].get(key)
        return item.minute.rate().tps if item is not None else 0.0

    def store_tps(self, field: int, span: int) -> float | None:
        """Per second over the last ``span`` one-second samples; None until there are."""
        samples = self._store_samples
        if len(samples) <= span:
            return None
        first, last = samples[-1 - span], samples[-1]
        elapsed = last[0] - first[0]
        return (last[field] - first[field]) * 1000.0 / elapsed if elapsed > 0 else 0.0

    def runtime_info(self) -> dict[str, str]:
        """The runtime-info keys Java's StoreStatsService and BrokerStats give, formatted
        as Java prints them (``putTps``: ``"12.5 11.9 10.0"``, a part empty until there
        are enough samples)."""
        times = max(1, self.stored_messages)

        def triple(field: int) -> str:
            parts = (self.store_tps(field, span) for span in STORE_RATE_SPANS)
            return " ".join("" if tps is None else java_double(tps) for tps in parts)

        total = " ".join(
            java_double(
                (self.store_tps(_FOUND, span) or 0.0) + (self.store_tps(_MISSED, span) or 0.0)
            )
            for span in STORE_RATE_SPANS
        )
        transferred = triple(_TRANSFERRED)
        return {
            "putTps": triple(_PUTS),
            "getFoundTps": triple(_FOUND),
            "getMissTps": triple(_MISSED),
            "getTotalTps": total,
            "getTransferedTps": transferred,  # 4.9's spelling
            "getTransferredTps": transferred,  # 5.x's
            "putMessageTimesTotal": str(times),
            "putMessageSizeTotal": str(self.stored_bytes),
            "putMessageAverageSize": java_double(self.stored_bytes / times),
            "putMessageFailedTimes": str(self.put_failures),
            "msgPutTotalTodayNow": str(self.stored_messages),
            "msgGetTotalTodayNow": str(self.transferred),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
        }


async def sample_periodically(
    stats: BrokerStats, wall_clock: Callable[[], float] = time.time
) -> None:
    """Tick ``stats`` every second, until cancelled."""
    while True:
        stats.tick(int(wall_clock() * 1000))
        await anyio.sleep(SAMPLE_INTERVAL)


def java_double(value: float) -> str:
    """``value`` as Java's Double.toString writes it: ``12.5``, ``0.0``, ``1.0E-4``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    shortest = repr(float(value))  # the shortest digits that read back, as Java's
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return shortest
    sign, digits, exponent = Decimal(shortest).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = int(exponent) + len(digits) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"
