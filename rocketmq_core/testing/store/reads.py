"""Conformance: what a put stores and how it reads back: records byte-exact, queue
offsets, reads at the edges, tag filters, ``message_at``."""

from __future__ import annotations

import time

import anyio
import pytest

from ...protocol.message import (
    BORNHOST_V6,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6,
    body_crc,
    decode_record,
    host_is_v6,
    iter_records,
    offset_msg_id,
    pack_host,
    record_size,
    tags_code,
    write_record,
)
from ...store.api import (
    DispatchRequest,
    GetStatus,
    MessageStore,
    PutResult,
    PutStatus,
)
from .base import ConformanceBase
from .helpers import (
    LONG_TOPIC,
    STORE_HOST,
    bodies,
    decode_all,
    expiry_config,
    int32,
    make_message,
    read_queue,
    tag_filter,
)
from .workload import (
    put_numbered,
)


class ReadContract(ConformanceBase):
    # --- round trip -------------------------------------------------------------------------

    async def test_empty_store(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            assert store.queues() == {}
            assert (store.min_commit_log_offset, store.max_commit_log_offset) == (0, 0)
            assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (0, 0)
            assert await store.earliest_store_time("T", 0) == -1
            assert await store.message_at(0) is None
            assert store.stats()["messages"] == 0

    async def test_put_then_get_returns_the_record_byte_exact(self, store_factory, tmp_path):
        message = make_message(
            "TopicTest",
            3,
            b"Hello, store",
            tags="TagA",
            keys="order-1 order-2",
            uniq_key="7F00000130390123ABCD0000075BCD15",
            properties={"WAIT": "true", "CLUSTER": "DefaultCluster"},
            flag=7,
            born_timestamp=1_700_000_000_001,
            born_host=pack_host("10.1.2.3", 5555),
            reconsume_times=2,
        )
        async with self.open_store(store_factory, tmp_path / "store") as store:
            before = time.time_ns() // 1_000_000
            result = await store.put(message)
            after = time.time_ns() // 1_000_000
            got = await store.get("TopicTest", 3, 0, 32)
        assert result.status is PutStatus.PUT_OK
        assert got.status is GetStatus.FOUND
        assert got.queue_offsets == [0]
        (record,) = (bytes(record) for record in got.records)
        stored = decode_record(record, check_crc=True)
        assert before <= stored.store_timestamp <= after
        size = record_size(12, 9, len(message.properties), False, False)
        expected = bytearray(size)
        write_record(
            expected,
            0,
            size=size,
            body=b"Hello, store",
            body_crc=body_crc(b"Hello, store"),
            topic=b"TopicTest",
            properties=message.properties,
            queue_id=3,
            flag=7,
            queue_offset=0,
            physical_offset=result.commit_log_offset,
            sys_flag=0,
            born_timestamp=1_700_000_000_001,
            born_host=pack_host("10.1.2.3", 5555),
            store_timestamp=stored.store_timestamp,
            store_host=STORE_HOST,
            reconsume_times=2,
            prepared_transaction_offset=0,
        )
        assert record == bytes(expected)
        assert stored.magic == MAGIC_V1
        assert stored.body_crc == body_crc(b"Hello, store")
        assert stored.properties == {
            "UNIQ_KEY": "7F00000130390123ABCD0000075BCD15",
            "TAGS": "TagA",
            "KEYS": "order-1 order-2",
            "WAIT": "true",
            "CLUSTER": "DefaultCluster",
        }

    async def test_put_result_names_the_record(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            first = await store.put(make_message(body=b"first"))
            second = await store.put(make_message(body=b"second"))
            first_record = await store.message_at(first.commit_log_offset)
            second_record = await store.message_at(second.commit_log_offset)
            end = store.max_commit_log_offset
        assert (first.status, second.status) == (PutStatus.PUT_OK, PutStatus.PUT_OK)
        assert (first.queue_offset, second.queue_offset) == (0, 1)
        assert first.commit_log_offset == 0
        assert second.commit_log_offset == len(first_record)
        assert end == len(first_record) + len(second_record)
        assert first.msg_ids == [offset_msg_id(STORE_HOST, 0)]
        assert second.msg_ids == [offset_msg_id(STORE_HOST, second.commit_log_offset)]
        assert decode_record(first_record).store_timestamp == first.store_timestamp
        assert decode_record(second_record).store_timestamp == second.store_timestamp
        assert decode_record(second_record).commit_log_offset == second.commit_log_offset

    async def test_get_body_is_the_records_back_to_back(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(5):
                await store.put(make_message(body=b"m%d" % number, tags="A"))
            result = await store.get("TopicTest", 0, 0, 32)
        assert result.body == b"".join(bytes(record) for record in result.records)
        decoded = list(iter_records(result.body))
        assert [m.body for m in decoded] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert [m.queue_offset for m in decoded] == result.queue_offsets == [0, 1, 2, 3, 4]

    async def test_store_timestamps_never_decrease_in_log_order(self, store_factory, tmp_path):
        results: list[PutResult] = []
        async with self.open_store(store_factory, tmp_path / "store") as store:

            async def putter(queue_id: int) -> None:
                for number in range(20):
                    results.append(await store.put(make_message("T", queue_id, b"%d" % number)))
                    if number % 5 == 0:
                        await anyio.sleep(0.001)

            async with anyio.create_task_group() as task_group:
                for queue_id in range(5):
                    task_group.start_soon(putter, queue_id)
            results.sort(key=lambda result: result.commit_log_offset)
            records = [await store.message_at(r.commit_log_offset) for r in results]
        times = [decode_record(bytes(record)).store_timestamp for record in records]
        assert times == sorted(times)
        assert times == [result.store_timestamp for result in results]

    async def test_topic_over_127_bytes_is_stored_as_v2(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            result = await store.put(make_message(LONG_TOPIC, 1, b"retry me", tags="A"))
            got = await store.get(LONG_TOPIC, 1, 0, 32)
        assert result.status is PutStatus.PUT_OK
        (stored,) = decode_all(got)
        assert (stored.magic, stored.topic, stored.body) == (MAGIC_V2, LONG_TOPIC, b"retry me")
        assert stored.size == record_size(8, len(LONG_TOPIC), 7, False, False)

    async def test_ipv6_hosts_round_trip(self, store_factory, tmp_path):
        store_host = pack_host("2001:db8::5", 10911)
        born_host = pack_host("fe80::1", 4321)
        async with self.open_store(
            store_factory, tmp_path / "store", store_host=store_host
        ) as store:
            result = await store.put(make_message(body=b"six", born_host=born_host))
            (stored,) = decode_all(await store.get("TopicTest", 0, 0, 32))
        assert stored.sys_flag == BORNHOST_V6 | STOREHOST_V6
        assert (stored.born_host, stored.store_host) == (born_host, store_host)
        assert stored.size == record_size(3, 9, 0, True, True)
        assert result.msg_ids == [offset_msg_id(store_host, result.commit_log_offset)]
        assert len(result.msg_ids[0]) == 56
        assert host_is_v6(stored.store_host)

    # --- offsets ----------------------------------------------------------------------------

    async def test_queue_offsets_start_at_zero_without_gaps(self, store_factory, tmp_path):
        places = [(topic, queue_id) for topic in ("T0", "T1", "T2") for queue_id in range(4)]
        expected: dict[tuple[str, int], list[bytes]] = {place: [] for place in places}
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(120):
                place = places[(number * 7) % len(places)]
                body = b"%d" % number
                result = await store.put(make_message(*place, body))
                assert result.queue_offset == len(expected[place])
                expected[place].append(body)
            for place in places:
                found = await read_queue(store, *place)
                assert [offset for offset, _ in found] == list(range(len(expected[place])))
                assert [decode_record(record).body for _, record in found] == expected[place]
                assert [decode_record(record).queue_offset for _, record in found] == list(
                    range(len(expected[place]))
                )

    async def test_min_and_max_offsets(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(7):
                await store.put(make_message("T", number % 2, b"x"))
            assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (0, 4)
            assert (store.min_offset("T", 1), store.max_offset("T", 1)) == (0, 3)
            assert (store.min_offset("T", 2), store.max_offset("T", 2)) == (0, 0)
            assert (store.min_offset("U", 0), store.max_offset("U", 0)) == (0, 0)

    async def test_queues_lists_every_written_queue(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for topic, queue_id in [("B", 3), ("A", 0), ("B", 0), ("A", 0), ("C", 7)]:
                await store.put(make_message(topic, queue_id, b"x"))
            assert store.queues() == {"A": [0], "B": [0, 3], "C": [7]}

    # --- reads at the edges -----------------------------------------------------------------

    async def test_unknown_queue_has_no_message(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message("Known", 0, b"x"))
            unknown_topic = await store.get("Unknown", 0, 0, 32)
            unknown_queue = await store.get("Known", 1, 5, 32)
        for result in (unknown_topic, unknown_queue):
            assert result.status is GetStatus.NO_MESSAGE_IN_QUEUE
            assert (result.next_begin_offset, result.min_offset, result.max_offset) == (0, 0, 0)
            assert (result.records, result.queue_offsets) == ([], [])

    async def test_offset_at_max_overflows_by_one(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for _ in range(3):
                await store.put(make_message(body=b"x"))
            result = await store.get("TopicTest", 0, 3, 32)
        assert result.status is GetStatus.OFFSET_OVERFLOW_ONE
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (3, 0, 3)
        assert result.records == []

    @pytest.mark.parametrize("offset", [4, 1000])
    async def test_offset_past_max_overflows_badly(self, store_factory, tmp_path, offset):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for _ in range(3):
                await store.put(make_message(body=b"x"))
            result = await store.get("TopicTest", 0, offset, 32)
        assert result.status is GetStatus.OFFSET_OVERFLOW_BADLY
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (3, 0, 3)
        assert result.records == []

    async def test_negative_offset_is_too_small(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message(body=b"x"))
            result = await store.get("TopicTest", 0, -1, 32)
        assert result.status is GetStatus.OFFSET_TOO_SMALL
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (0, 0, 1)
        assert result.records == []

    async def test_offset_below_min_after_expiry_is_too_small(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store", **expiry_config()) as store:
            await put_numbered(store, "T", [0], 100, body_size=2000)
            await anyio.sleep(0.05)
            assert await store.delete_expired(force=True) > 0
            low = store.min_offset("T", 0)
            assert 0 < low < 100
            for offset in (0, low - 1):
                result = await store.get("T", 0, offset, 32)
                assert result.status is GetStatus.OFFSET_TOO_SMALL
                assert (result.next_begin_offset, result.min_offset) == (low, low)
                assert (result.max_offset, result.records) == (100, [])

    async def test_found_reports_next_offset_and_bounds(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(3):
                await store.put(make_message(body=b"m%d" % number))
            result = await store.get("TopicTest", 0, 1, 32)
        assert result.status is GetStatus.FOUND
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (3, 0, 3)
        assert result.queue_offsets == [1, 2]
        assert bodies(result) == [b"m1", b"m2"]

    async def test_no_matched_message_moves_past_what_was_examined(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for _ in range(5):
                await store.put(make_message(body=b"a", tags="A"))
            from_start = await store.get("TopicTest", 0, 0, 32, tag_filter("B"))
            from_middle = await store.get("TopicTest", 0, 3, 32, tag_filter("B"))
        for result in (from_start, from_middle):
            assert result.status is GetStatus.NO_MATCHED_MESSAGE
            assert (result.next_begin_offset, result.min_offset, result.max_offset) == (5, 0, 5)
            assert (result.records, result.queue_offsets) == ([], [])

    async def test_a_read_names_the_last_entry_it_looked_at(self, store_factory, tmp_path):
        # the broker's suggestWhichBrokerId measures how far behind a reader is from it
        async with self.open_store(store_factory, tmp_path / "store") as store:
            puts = [await store.put(make_message(body=b"a", tags="A")) for _ in range(5)]
            filtered = await store.get("TopicTest", 0, 0, 32, tag_filter("B"))
            first_two = await store.get("TopicTest", 0, 0, 2, tag_filter("A"))
            at_the_end = await store.get("TopicTest", 0, 5, 32)
        positions = [put.commit_log_offset for put in puts]
        assert filtered.last_examined_position == positions[-1]
        assert first_two.last_examined_position == positions[1]
        assert at_the_end.last_examined_position == -1

    async def test_max_count_limits_the_records(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(10):
                await store.put(make_message(body=b"m%d" % number))
            result = await store.get("TopicTest", 0, 0, 3)
        assert result.status is GetStatus.FOUND
        assert (result.queue_offsets, result.next_begin_offset) == ([0, 1, 2], 3)
        assert bodies(result) == [b"m0", b"m1", b"m2"]

    async def test_max_bytes_limits_the_records(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(5):
                await store.put(make_message(body=b"%04d" % number * 250))
            size = len((await store.get("TopicTest", 0, 0, 1)).records[0])
            result = await store.get("TopicTest", 0, 0, 32, max_bytes=2 * size + size // 2)
        assert result.status is GetStatus.FOUND
        assert (result.queue_offsets, result.next_begin_offset) == ([0, 1], 2)
        assert [len(record) for record in result.records] == [size, size]

    async def test_max_bytes_below_one_record_still_returns_one(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(3):
                await store.put(make_message(body=b"%04d" % number * 250))
            result = await store.get("TopicTest", 0, 1, 32, max_bytes=1)
        assert result.status is GetStatus.FOUND
        assert (result.queue_offsets, result.next_begin_offset) == ([1], 2)
        assert bodies(result) == [b"0001" * 250]

    # --- tag filters ------------------------------------------------------------------------

    TAGGED = [("A", b"0"), ("B", b"1"), (None, b"2"), ("A", b"3"), ("C", b"4"), (None, b"5")]

    async def put_tagged(self, store: MessageStore) -> None:
        for tag, body in self.TAGGED:
            await store.put(make_message(body=body, tags=tag))

    async def test_no_tag_filter_gets_everything(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await self.put_tagged(store)
            result = await store.get("TopicTest", 0, 0, 32, None)
        assert bodies(result) == [b"0", b"1", b"2", b"3", b"4", b"5"]
        assert result.next_begin_offset == 6

    async def test_tag_filter_gets_only_matching_messages(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await self.put_tagged(store)
            only_a = await store.get("TopicTest", 0, 0, 32, tag_filter("A"))
            a_or_c = await store.get("TopicTest", 0, 0, 32, tag_filter("A", "C"))
            first_a = await store.get("TopicTest", 0, 0, 1, tag_filter("A"))
        assert (only_a.status, only_a.queue_offsets, bodies(only_a)) == (
            GetStatus.FOUND,
            [0, 3],
            [b"0", b"3"],
        )
        assert only_a.next_begin_offset == 6  # the untagged tail was examined too
        assert (a_or_c.queue_offsets, a_or_c.next_begin_offset) == ([0, 3, 4], 6)
        assert (first_a.queue_offsets, first_a.next_begin_offset) == ([0], 1)

    async def test_tag_filter_skips_untagged_messages(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await self.put_tagged(store)
            result = await store.get("TopicTest", 0, 2, 32, tag_filter("B"))
        assert result.status is GetStatus.NO_MATCHED_MESSAGE
        assert result.next_begin_offset == 6

    async def test_tags_with_negative_hash_codes_filter(self, store_factory, tmp_path):
        lowest, negative = "polygenelubricants", "tag\U0001f600x"
        assert tags_code(lowest) == -(2**31) and tags_code(negative) < 0
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for tag in (lowest, "A", negative, lowest):
                await store.put(make_message(body=tag.encode(), tags=tag))
            found_lowest = await store.get("TopicTest", 0, 0, 32, tag_filter(lowest))
            found_negative = await store.get("TopicTest", 0, 0, 32, tag_filter(negative))
        assert found_lowest.queue_offsets == [0, 3]
        assert found_negative.queue_offsets == [2]

    async def test_tags_code_override_replaces_the_tag_hash(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message(body=b"due", tags="A", tags_code=777))
            await store.put(make_message(body=b"plain", tags="A"))
            by_code = await store.get("TopicTest", 0, 0, 32, frozenset({777}))
            by_tag = await store.get("TopicTest", 0, 0, 32, tag_filter("A"))
        assert (by_code.queue_offsets, bodies(by_code)) == ([0], [b"due"])
        assert (by_tag.queue_offsets, bodies(by_tag)) == ([1], [b"plain"])

    async def test_64_bit_tags_code_is_kept_and_filters_on_its_int32(self, store_factory, tmp_path):
        due = 1_700_000_000_123  # a delivery time, as the delay scheduler stores it
        seen: list[DispatchRequest] = []
        store = store_factory(tmp_path / "store", **self.config_defaults)
        store.add_dispatcher(seen.append)
        await store.open()
        try:
            await store.put(make_message(body=b"later", tags="A", tags_code=due))
            truncated = await store.get("TopicTest", 0, 0, 32, frozenset({int32(due)}))
        finally:
            await store.close()
        assert [request.tags_code for request in seen] == [due]
        assert (truncated.queue_offsets, bodies(truncated)) == ([0], [b"later"])

    # --- message_at -------------------------------------------------------------------------

    async def test_message_at_returns_the_record(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            results = [await store.put(make_message("T", n % 2, b"m%d" % n)) for n in range(4)]
            records = [await store.message_at(result.commit_log_offset) for result in results]
            got = [await store.get("T", n % 2, n // 2, 1) for n in range(4)]
        assert [bytes(record) for record in records] == [bytes(r.records[0]) for r in got]
        stored = [decode_record(bytes(record), check_crc=True) for record in records]
        assert [m.body for m in stored] == [b"m0", b"m1", b"m2", b"m3"]
        assert [m.commit_log_offset for m in stored] == [r.commit_log_offset for r in results]

    async def test_message_at_a_non_record_start_is_none(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            first = await store.put(make_message(body=b"one"))
            await store.put(make_message(body=b"two"))
            end = store.max_commit_log_offset
            assert await store.message_at(end) is None
            assert await store.message_at(end + 1000) is None
            assert await store.message_at(first.commit_log_offset + 1) is None
