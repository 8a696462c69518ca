"""Conformance: dispatchers, query by key (the index) and offsets by time."""

from __future__ import annotations

import time

import anyio

from ...protocol.message import (
    TRANSACTION_PREPARED,
    decode_offset_msg_id,
    decode_record,
    tags_code,
)
from ...store.api import (
    DispatchRequest,
    MessageStore,
    QueryResult,
)
from .base import ConformanceBase
from .helpers import (
    HOUR_MS,
    make_message,
)
from .workload import (
    Acked,
    put_acked,
)


class LookupContract(ConformanceBase):
    # --- dispatch ---------------------------------------------------------------------------

    async def test_dispatcher_sees_each_record_once_in_log_order(self, store_factory, tmp_path):
        seen: list[DispatchRequest] = []
        store = store_factory(tmp_path / "store", **self.config_defaults)
        store.add_dispatcher(seen.append)
        await store.open()
        try:
            results = [
                await store.put(
                    make_message("D", 1, b"a", tags="TagA", keys="k1 k2", uniq_key="U1")
                ),
                await store.put(make_message("D", 1, b"b")),
                await store.put(make_message("E", 0, b"c", sys_flag=TRANSACTION_PREPARED)),
                await store.put(make_message("D", 1, b"d", tags="A", tags_code=42)),
                await store.put_batch([make_message("E", 2, b"e", keys="k3") for _ in range(2)]),
            ]
            offsets = [result.commit_log_offset for result in results[:4]]
            offsets += [decode_offset_msg_id(msg_id)[1] for msg_id in results[4].msg_ids]
            records = [bytes(await store.message_at(offset)) for offset in offsets]
        finally:
            await store.close()
        expected = []
        for record, code in zip(records, [tags_code("TagA"), 0, 0, 42, 0, 0], strict=True):
            stored = decode_record(record)
            expected.append(
                DispatchRequest(
                    topic=stored.topic,
                    queue_id=stored.queue_id,
                    commit_log_offset=stored.commit_log_offset,
                    size=len(record),
                    tags_code=code,
                    store_timestamp=stored.store_timestamp,
                    queue_offset=stored.queue_offset,
                    keys=stored.properties.get("KEYS"),
                    uniq_key=stored.properties.get("UNIQ_KEY"),
                    sys_flag=stored.sys_flag,
                    prepared_transaction_offset=stored.prepared_transaction_offset,
                )
            )
        assert seen == expected
        assert [request.queue_offset for request in seen] == [0, 1, 0, 2, 0, 1]
        assert [request.keys for request in seen] == ["k1 k2", None, None, None, "k3", "k3"]
        assert seen[0].uniq_key == "U1" and seen[2].sys_flag == TRANSACTION_PREPARED

    async def test_dispatcher_with_wants_hears_every_record_of_the_queues_it_wants(
        self, store_factory, tmp_path
    ):
        everything: list[DispatchRequest] = []
        wanted_heard: list[DispatchRequest] = []
        wanted = {("W", 0)}

        class QueueWatcher:  # as the long-polling service: only queues with a pull held
            def wants(self, topic: str, queue_id: int) -> bool:
                return (topic, queue_id) in wanted

            def __call__(self, request: DispatchRequest) -> None:
                wanted_heard.append(request)

        store = store_factory(tmp_path / "store", **self.config_defaults)
        store.add_dispatcher(everything.append)
        store.add_dispatcher(QueueWatcher())
        await store.open()
        try:
            await store.put(make_message("W", 0, b"a"))
            await store.put(make_message("W", 1, b"b"))
            await store.put_batch([make_message("X", 0, b"c") for _ in range(2)])
            wanted.add(("X", 0))  # a pull held there now: its next records are wanted
            await store.put_batch([make_message("X", 0, b"d") for _ in range(2)])
            await store.put(make_message("W", 0, b"e"))
            wanted.clear()
            await store.put(make_message("W", 0, b"f"))
        finally:
            await store.close()
        assert len(everything) == 8
        must_hear = [everything[index] for index in (0, 4, 5, 6)]
        if self.skips_unwanted_records:
            assert wanted_heard == must_hear
        else:
            assert [request for request in wanted_heard if request in must_hear] == must_hear

    # --- query by key -----------------------------------------------------------------------

    async def put_keyed(self, store: MessageStore) -> list[Acked]:
        acked = []
        for number, keys in enumerate(["k1 shared", "shared k2", "k3", "shared"]):
            message = make_message("Q", 0, b"q%d" % number, keys=keys, uniq_key=f"UNIQ{number}")
            acked.append(await put_acked(store, message))
        return acked

    @staticmethod
    def matching(result: QueryResult, key: str) -> list[bytes]:
        """What a client keeps of a query answer: records that carry the key (the store
        may return hash collisions)."""
        kept = []
        for record in result.records:
            stored = decode_record(bytes(record), check_crc=True)
            if key in stored.keys or stored.properties.get("UNIQ_KEY") == key:
                kept.append(bytes(record))
        return kept

    async def test_query_by_keys_token_newest_first(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            acked = await self.put_keyed(store)
            result = await store.query_by_key("Q", "shared", 32, 0, 2**62)
            k2 = await store.query_by_key("Q", "k2", 32, 0, 2**62)
        assert self.matching(result, "shared") == [acked[i].record for i in (3, 1, 0)]
        assert self.matching(k2, "k2") == [acked[1].record]

    async def test_query_by_uniq_key(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            acked = await self.put_keyed(store)
            results = [await store.query_by_key("Q", f"UNIQ{n}", 32, 0, 2**62) for n in range(4)]
        for number, result in enumerate(results):
            assert self.matching(result, f"UNIQ{number}") == [acked[number].record]

    async def test_query_max_count_keeps_the_newest(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            acked = await self.put_keyed(store)
            result = await store.query_by_key("Q", "shared", 2, 0, 2**62)
        assert len(result.records) == 2
        assert self.matching(result, "shared") == [acked[3].record, acked[1].record]

    async def test_query_time_range(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            acked = await self.put_keyed(store)
            times = [decode_record(a.record).store_timestamp for a in acked]
            first, last = min(times), max(times)
            around = await store.query_by_key("Q", "shared", 32, first - HOUR_MS, last + HOUR_MS)
            later = await store.query_by_key("Q", "shared", 32, last + HOUR_MS, last + 2 * HOUR_MS)
            earlier = await store.query_by_key("Q", "shared", 32, 0, first - HOUR_MS)
        assert self.matching(around, "shared") == [acked[i].record for i in (3, 1, 0)]
        assert (later.records, earlier.records) == ([], [])

    async def test_query_unknown_key_or_other_topic_is_empty(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await self.put_keyed(store)
            unknown = await store.query_by_key("Q", "never-used", 32, 0, 2**62)
            other_topic = await store.query_by_key("Other", "shared", 32, 0, 2**62)
        assert (unknown.records, other_topic.records) == ([], [])

    async def test_query_reports_the_last_index_update(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            acked = await self.put_keyed(store)
            result = await store.query_by_key("Q", "k1", 32, 0, 2**62)
        last = decode_record(acked[-1].record)
        assert result.index_last_update_timestamp == last.store_timestamp
        assert result.index_last_update_phy_offset == last.commit_log_offset

    # --- offsets by time --------------------------------------------------------------------

    async def put_timed(self, store: MessageStore) -> list[int]:
        """Three messages stored at three different milliseconds; their store times."""
        times = []
        for number in range(3):
            if number:
                await anyio.sleep(0.003)
            acked = await put_acked(store, make_message("Time", 0, b"t%d" % number))
            times.append(decode_record(acked.record).store_timestamp)
        assert times[0] < times[1] < times[2]
        return times

    async def test_offset_by_time_lower_is_first_stored_at_or_after(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            t0, t1, t2 = await self.put_timed(store)
            cases = [(t0 - 1000, 0), (t0, 0), (t0 + 1, 1), (t1, 1), (t2, 2), (t2 + 1, 3)]
            answers = [await store.offset_by_time("Time", 0, t, "lower") for t, _ in cases]
            default = await store.offset_by_time("Time", 0, t1)
        assert answers == [offset for _, offset in cases]
        assert default == 1

    async def test_offset_by_time_upper_is_last_stored_at_or_before(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            t0, t1, t2 = await self.put_timed(store)
            cases = [(t0 - 1, 0), (t0, 0), (t1 - 1, 0), (t1, 1), (t2, 2), (t2 + 1000, 2)]
            answers = [await store.offset_by_time("Time", 0, t, "upper") for t, _ in cases]
        assert answers == [offset for _, offset in cases]

    async def test_offset_by_time_of_an_unknown_queue_is_zero(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message("Time", 0, b"x"))
            now = time.time_ns() // 1_000_000
            assert await store.offset_by_time("Time", 5, now, "lower") == 0
            assert await store.offset_by_time("Nothing", 0, now, "upper") == 0

    async def test_earliest_store_time(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            assert await store.earliest_store_time("Time", 0) == -1
            t0, _t1, _t2 = await self.put_timed(store)
            assert await store.earliest_store_time("Time", 0) == t0
            assert await store.earliest_store_time("Time", 1) == -1
