"""Conformance: retention, reopening, crashes, close, flush policies and stats."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from ...protocol.message import (
    decode_record,
)
from ...store.api import (
    GetStatus,
    PutStatus,
    StoreClosedError,
    SupportsFlush,
)
from .base import ConformanceBase
from .helpers import (
    assert_same_records,
    bodies,
    expiry_config,
    make_message,
    quiet_cleanup,
    read_queue,
    tag_filter,
)
from .workload import (
    Workload,
    assert_empty,
    assert_holds,
    put_numbered,
    put_workload,
)


class DurabilityContract(ConformanceBase):
    # --- retention --------------------------------------------------------------------------

    async def test_delete_expired_removes_old_data(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store", **expiry_config()) as store:
            acked = await put_numbered(store, "T", [0, 1], 100, body_size=2000)
            await anyio.sleep(0.05)
            assert await store.delete_expired(force=True) > 0
            lows = [store.min_offset("T", queue_id) for queue_id in (0, 1)]
            assert store.min_commit_log_offset > 0
            assert all(low > 0 for low in lows), lows
            assert [store.max_offset("T", queue_id) for queue_id in (0, 1)] == [50, 50]
            for queue_id, low in zip((0, 1), lows, strict=True):
                found = await read_queue(store, "T", queue_id)
                expected = [a for a in acked if a.queue_id == queue_id][low:]
                assert_same_records(found, [(a.queue_offset, a.record) for a in expected], "kept")
                for _offset, record in found:
                    stored = decode_record(record, check_crc=True)
                    assert stored.commit_log_offset >= store.min_commit_log_offset
            newest = acked[-1]
            assert await store.message_at(newest.commit_log_offset) == newest.record
            assert await store.message_at(acked[0].commit_log_offset) is None
            result = await store.get("T", 1, 0, 32)
            assert result.status is GetStatus.OFFSET_TOO_SMALL
            assert result.next_begin_offset == lows[1]

    async def test_nothing_expires_within_the_reserved_time(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store", **quiet_cleanup()) as store:
            acked = await put_numbered(store, "T", [0, 1], 100, body_size=2000)
            assert await store.delete_expired(force=True) == 0
            assert store.min_commit_log_offset == 0
            assert [store.min_offset("T", queue_id) for queue_id in (0, 1)] == [0, 0]
            assert await store.message_at(0) == acked[0].record

    # --- reopening --------------------------------------------------------------------------

    async def test_reopen_keeps_every_record(self, store_factory, tmp_path):
        directory = tmp_path / "store"
        async with self.open_store(store_factory, directory) as store:
            workload = await put_workload(store)
            bounds = (store.min_commit_log_offset, store.max_commit_log_offset)
        async with self.open_store(store_factory, directory) as store:
            if not self.persistent:
                await assert_empty(store, workload)
                return
            await assert_holds(store, workload)
            assert (store.min_commit_log_offset, store.max_commit_log_offset) == bounds

    async def test_reopen_keeps_the_index(self, store_factory, tmp_path):
        directory = tmp_path / "store"
        async with self.open_store(store_factory, directory) as store:
            workload = await put_workload(store)
        samples = workload.in_log_order()[:: len(workload.acked) // 7]
        group = [
            a.record
            for a in reversed(workload.in_log_order())
            if a.topic == "Alpha" and "group3" in a.keys
        ]
        async with self.open_store(store_factory, directory) as store:
            by_uniq = [await store.query_by_key(a.topic, a.uniq_key, 32, 0, 2**62) for a in samples]
            by_keys = await store.query_by_key("Alpha", "group3", 64, 0, 2**62)
        if not self.persistent:
            assert all(result.records == [] for result in [*by_uniq, by_keys])
            return
        for acked, result in zip(samples, by_uniq, strict=True):
            assert self.matching(result, acked.uniq_key) == [acked.record]
        assert 0 < len(group) <= 64
        assert_same_records(self.matching(by_keys, "group3"), group, "group3")

    async def test_reopen_keeps_tags_codes(self, store_factory, tmp_path):
        directory = tmp_path / "store"
        async with self.open_store(store_factory, directory) as store:
            workload = await put_workload(store)
        expected = [
            (a.queue_offset, a.record)
            for a in workload.queued()[("Alpha", 0)]
            if decode_record(a.record).tags == "B"
        ]
        async with self.open_store(store_factory, directory) as store:
            found = await read_queue(store, "Alpha", 0, 0, tag_filter("B"))
        if not self.persistent:
            assert found == []
            return
        assert expected
        assert_same_records(found, expected, "tag B")

    async def test_reopen_continues_offsets(self, store_factory, tmp_path):
        directory = tmp_path / "store"
        async with self.open_store(store_factory, directory) as store:
            workload = await put_workload(store)
        async with self.open_store(store_factory, directory) as store:
            for (topic, queue_id), entries in workload.queued().items():
                result = await store.put(make_message(topic, queue_id, b"after reopen"))
                assert result.status is PutStatus.PUT_OK
                if not self.persistent:
                    assert result.queue_offset == 0
                    continue
                assert result.queue_offset == len(entries)
                assert result.commit_log_offset >= workload.max_commit_log_offset
                found = await read_queue(store, topic, queue_id)
                assert [offset for offset, _ in found] == list(range(len(entries) + 1))
                assert decode_record(found[-1][1]).body == b"after reopen"

    async def test_reopen_after_expiry_keeps_min_offsets(self, store_factory, tmp_path):
        directory = tmp_path / "store"
        config = expiry_config()
        async with self.open_store(store_factory, directory, **config) as store:
            acked = await put_numbered(store, "T", [0], 100, body_size=2000)
            await anyio.sleep(0.05)
            assert await store.delete_expired(force=True) > 0
            low, low_log = store.min_offset("T", 0), store.min_commit_log_offset
        async with self.open_store(store_factory, directory, **config) as store:
            if not self.persistent:
                await assert_empty(store, Workload(acked))
                return
            assert (store.min_offset("T", 0), store.max_offset("T", 0)) == (low, 100)
            assert store.min_commit_log_offset == low_log
            result = await store.get("T", 0, 0, 32)
            assert (result.status, result.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
            found = await read_queue(store, "T", 0)
        assert_same_records(found, [(a.queue_offset, a.record) for a in acked[low:]], "kept")

    # --- crashes ----------------------------------------------------------------------------

    async def crashed_copy(self, store_factory, tmp_path) -> tuple[Path, Workload]:
        """A copy of a sync-flushed store taken while it was open, and what it acknowledged."""
        source, copy = tmp_path / "store", tmp_path / "crashed"
        async with self.open_store(store_factory, source, flush="sync") as store:
            workload = await put_workload(store, count=160)
            # blocking on purpose: no task of the store runs while the copy is made
            self.crash_copy(source, copy)
        return copy, workload

    async def test_crash_keeps_every_acknowledged_message(self, store_factory, tmp_path):
        copy, workload = await self.crashed_copy(store_factory, tmp_path)
        async with self.open_store(store_factory, copy, flush="sync") as store:
            if not self.persistent:
                await assert_empty(store, workload)
                return
            await assert_holds(store, workload)
            assert store.max_commit_log_offset == workload.max_commit_log_offset

    async def test_crash_recovery_continues_offsets(self, store_factory, tmp_path):
        copy, workload = await self.crashed_copy(store_factory, tmp_path)
        async with self.open_store(store_factory, copy, flush="sync") as store:
            expected = {place: len(entries) for place, entries in workload.queued().items()}
            if not self.persistent:
                expected = dict.fromkeys(expected, 0)
            for (topic, queue_id), count in expected.items():
                result = await store.put(make_message(topic, queue_id, b"after crash"))
                assert result.queue_offset == count
                record = await store.message_at(result.commit_log_offset)
                assert decode_record(bytes(record), check_crc=True).body == b"after crash"
                found = await read_queue(store, topic, queue_id)
                assert [offset for offset, _ in found] == list(range(count + 1))

    async def test_torn_tail_recovers_a_consistent_prefix(self, store_factory, tmp_path):
        copy, workload = await self.crashed_copy(store_factory, tmp_path)
        torn = self.tear_tail(copy)
        loss = self.torn_tail_loss if torn else 0
        async with self.open_store(store_factory, copy, flush="sync") as store:
            if not self.persistent:
                await assert_empty(store, workload)
                return
            in_order = workload.in_log_order()
            by_offset = {acked.commit_log_offset: acked for acked in in_order}

            def genuine(record: bytes, queue_offset: int | None = None) -> bool:
                # past the intact prefix a record may be gone, or kept with damage no CRC
                # covers (properties): it must still be an acknowledged body at its place
                stored = decode_record(record, check_crc=True)
                acked = by_offset.get(stored.commit_log_offset)
                return (
                    acked is not None
                    and (stored.topic, stored.queue_id) == (acked.topic, acked.queue_id)
                    and stored.body == decode_record(acked.record).body
                    and queue_offset in (None, acked.queue_offset)
                )

            kept = 0
            for acked in in_order:
                record = await store.message_at(acked.commit_log_offset)
                if record is None or bytes(record) != acked.record:
                    break
                kept += 1
            total = len(in_order)
            assert kept >= total - loss, f"{total - kept} of {total} messages lost"
            for acked in in_order[kept:]:
                record = await store.message_at(acked.commit_log_offset)
                assert record is None or genuine(bytes(record)), acked.commit_log_offset
            queued = Workload(in_order[:kept]).queued()
            extra = 0
            for (topic, queue_id), entries in workload.queued().items():
                prefix = queued.get((topic, queue_id), [])
                assert prefix == entries[: len(prefix)]
                found = await read_queue(store, topic, queue_id)
                assert [offset for offset, _ in found] == list(range(len(found)))
                assert store.max_offset(topic, queue_id) == len(found)
                expected = [(a.queue_offset, a.record) for a in prefix]
                assert_same_records(found[: len(prefix)], expected, topic)
                for offset, record in found[len(prefix) :]:
                    assert genuine(record, offset), (topic, queue_id, offset)
                    extra += 1
            assert extra <= total - kept
            assert store.max_commit_log_offset <= workload.max_commit_log_offset
            assert await store.message_at(store.max_commit_log_offset) is None
            # the log goes on from the recovered end
            next_offset = store.max_offset("Alpha", 0)
            result = await store.put(make_message("Alpha", 0, b"after the tear"))
            assert result.queue_offset == next_offset
            got = await store.get("Alpha", 0, next_offset, 1)
            assert bodies(got) == [b"after the tear"]

    # --- close, flush, stats ----------------------------------------------------------------

    async def test_closed_store_refuses_calls(self, store_factory, tmp_path):
        store = store_factory(tmp_path / "store", **self.config_defaults)
        await store.open()
        result = await store.put(make_message(body=b"x"))
        await store.close()
        with pytest.raises(StoreClosedError):
            await store.put(make_message(body=b"y"))
        with pytest.raises(StoreClosedError):
            await store.put_batch([make_message(body=b"y")])
        with pytest.raises(StoreClosedError):
            await store.get("TopicTest", 0, 0, 32)
        with pytest.raises(StoreClosedError):
            await store.message_at(result.commit_log_offset)

    async def test_close_twice_is_harmless(self, store_factory, tmp_path):
        store = store_factory(tmp_path / "store", **self.config_defaults)
        await store.open()
        await store.put(make_message(body=b"x"))
        await store.close()
        await store.close()
        with pytest.raises(StoreClosedError):
            await store.get("TopicTest", 0, 0, 32)

    @pytest.mark.parametrize("flush", ["sync", "async"])
    async def test_puts_are_acknowledged_under_each_flush_policy(
        self, store_factory, tmp_path, flush
    ):
        async with self.open_store(store_factory, tmp_path / "store", flush=flush) as store:
            with anyio.fail_after(10):
                waiting = await store.put(make_message(body=b"w", properties={"WAIT": "true"}))
                not_waiting = await store.put(make_message(body=b"n", properties={"WAIT": "false"}))
                batch = await store.put_batch([make_message(body=b"b%d" % n) for n in range(3)])
                if isinstance(store, SupportsFlush):
                    await store.flush()
                    await store.flush()  # nothing new: still fine
            got = await store.get("TopicTest", 0, 0, 32)
        assert [waiting.status, not_waiting.status, batch.status] == [PutStatus.PUT_OK] * 3
        assert bodies(got) == [b"w", b"n", b"b0", b"b1", b"b2"]

    @pytest.mark.parametrize("flush", ["sync", "async"])
    async def test_append_stores_at_once_and_names_what_put_waits_for(
        self, store_factory, tmp_path, flush
    ):
        async with self.open_store(store_factory, tmp_path / "store", flush=flush) as store:
            waiting = store.append(make_message(body=b"w", properties={"WAIT": "true"}))
            not_waiting = store.append(make_message(body=b"n", properties={"WAIT": "false"}))
            batch = store.append_batch([make_message(body=b"b%d" % n) for n in range(2)])
            refused = store.append(make_message("", 0, b"refused"))
            # readable before anything is awaited: the broker answers from here
            got = await store.get("TopicTest", 0, 0, 32)
            with anyio.fail_after(10):
                durable = await store.wait_durable(waiting)
                durable_batch = await store.wait_durable(batch)
        assert bodies(got) == [b"w", b"n", b"b0", b"b1"]
        assert [waiting.queue_offset, not_waiting.queue_offset, batch.queue_offset] == [0, 1, 2]
        assert not_waiting.flush_to < 0 and refused.flush_to < 0
        assert refused.status is PutStatus.MESSAGE_ILLEGAL
        if flush == "sync" and isinstance(store, SupportsFlush):
            # put would wait until the record's end is durable
            assert waiting.flush_to > waiting.commit_log_offset
            assert batch.flush_to > batch.commit_log_offsets[-1]
        else:
            assert waiting.flush_to < 0 and batch.flush_to < 0
        assert durable.status is PutStatus.PUT_OK and durable_batch.status is PutStatus.PUT_OK

    async def test_stats_count_messages(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            assert store.stats()["messages"] == 0
            await store.put(make_message("T", 0, b"x"))
            await store.put_batch([make_message("T", 1, b"y"), make_message("T", 1, b"z")])
            await store.put(make_message("", 0, b"refused"))
            stats = store.stats()
        assert isinstance(stats, dict)
        assert stats["messages"] == 3
