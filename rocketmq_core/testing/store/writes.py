"""Conformance: batches, the puts a store refuses, transaction records, concurrent putters."""

from __future__ import annotations

import anyio
import pytest

from ...protocol.message import (
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    decode_offset_msg_id,
    decode_record,
    offset_msg_id,
)
from ...store.api import (
    GetStatus,
    PutStatus,
)
from .base import ConformanceBase
from .helpers import (
    STORE_HOST,
    bodies,
    decode_all,
    make_message,
    read_queue,
)


class WriteContract(ConformanceBase):
    # --- batches ----------------------------------------------------------------------------

    async def test_batch_gets_consecutive_queue_offsets(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            for number in range(2):
                await store.put(make_message("T", 1, b"single%d" % number))
            batch = [make_message("T", 1, b"batch%d" % n, uniq_key=f"U{n}") for n in range(5)]
            result = await store.put_batch(batch)
            found = await read_queue(store, "T", 1)
        assert result.status is PutStatus.PUT_OK
        assert result.queue_offset == 2
        assert [offset for offset, _ in found] == list(range(7))
        stored = [decode_record(record) for _, record in found]
        assert [m.body for m in stored[2:]] == [b"batch%d" % n for n in range(5)]
        assert [m.queue_offset for m in stored] == list(range(7))
        assert [m.properties["UNIQ_KEY"] for m in stored[2:]] == [f"U{n}" for n in range(5)]

    async def test_batch_returns_one_msg_id_per_record(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message("T", 0, b"before"))
            result = await store.put_batch([make_message("T", 0, b"b%d" % n) for n in range(4)])
            offsets = [decode_offset_msg_id(msg_id)[1] for msg_id in result.msg_ids]
            records = [await store.message_at(offset) for offset in offsets]
        assert len(result.msg_ids) == 4
        assert result.commit_log_offset == offsets[0]
        assert offsets == sorted(set(offsets))
        assert result.msg_ids == [offset_msg_id(STORE_HOST, offset) for offset in offsets]
        stored = [decode_record(bytes(record)) for record in records]
        assert [m.body for m in stored] == [b"b0", b"b1", b"b2", b"b3"]
        assert [m.commit_log_offset for m in stored] == offsets
        assert [m.queue_offset for m in stored] == [1, 2, 3, 4]

    async def test_batch_with_an_invalid_message_stores_nothing(self, store_factory, tmp_path):
        async with self.open_store(
            store_factory, tmp_path / "store", max_message_size=100
        ) as store:
            await store.put(make_message("T", 0, b"before"))
            end = store.max_commit_log_offset
            batch = [make_message("T", 0, b"ok"), make_message("T", 0, b"x" * 101)]
            batch.append(make_message("T", 0, b"ok too"))
            result = await store.put_batch(batch)
            assert result.status is PutStatus.MESSAGE_ILLEGAL
            assert "maxMessageSize" in result.remark
            assert (store.max_offset("T", 0), store.max_commit_log_offset) == (1, end)
            after = await store.put(make_message("T", 0, b"after"))
            assert after.queue_offset == 1
            found = await read_queue(store, "T", 0)
        assert [decode_record(record).body for _, record in found] == [b"before", b"after"]

    @pytest.mark.parametrize("other", [("T", 1), ("U", 0)], ids=["queue", "topic"])
    async def test_batch_mixing_queues_is_refused(self, store_factory, tmp_path, other):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            batch = [make_message("T", 0, b"one"), make_message(*other, b"two")]
            result = await store.put_batch(batch)
            assert result.status is PutStatus.MESSAGE_ILLEGAL
            assert result.remark
            assert store.queues() == {}
            assert store.max_commit_log_offset == 0

    # --- refusals ---------------------------------------------------------------------------

    async def test_oversized_body_is_illegal(self, store_factory, tmp_path):
        async with self.open_store(
            store_factory, tmp_path / "store", max_message_size=1024
        ) as store:
            result = await store.put(make_message(body=b"x" * 1025))
            assert result.status is PutStatus.MESSAGE_ILLEGAL
            assert "maxMessageSize" in result.remark
            assert not result.status.stored
            assert store.queues() == {}
            assert store.max_offset("TopicTest", 0) == 0
            assert store.max_commit_log_offset == 0
            assert store.stats()["messages"] == 0

    async def test_body_of_max_message_size_is_stored(self, store_factory, tmp_path):
        async with self.open_store(
            store_factory, tmp_path / "store", max_message_size=1024
        ) as store:
            result = await store.put(make_message(body=b"y" * 1024))
            got = await store.get("TopicTest", 0, 0, 32)
        assert result.status is PutStatus.PUT_OK
        assert bodies(got) == [b"y" * 1024]

    async def test_oversized_properties_are_refused(self, store_factory, tmp_path):
        properties = {"BIG": "v" * (MAX_PROPERTIES_LENGTH - 5 + 1)}  # 32768 bytes encoded
        async with self.open_store(store_factory, tmp_path / "store") as store:
            result = await store.put(make_message(body=b"x", properties=properties))
            assert result.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
            assert result.remark
            assert store.queues() == {}
            assert store.max_commit_log_offset == 0

    async def test_properties_of_32767_bytes_are_stored(self, store_factory, tmp_path):
        properties = {"BIG": "v" * (MAX_PROPERTIES_LENGTH - 5)}
        message = make_message(body=b"x", properties=properties)
        assert len(message.properties) == MAX_PROPERTIES_LENGTH
        async with self.open_store(store_factory, tmp_path / "store") as store:
            result = await store.put(message)
            (stored,) = decode_all(await store.get("TopicTest", 0, 0, 32))
        assert result.status is PutStatus.PUT_OK
        assert stored.properties == properties

    async def test_empty_topic_is_illegal(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            result = await store.put(make_message("", 0, b"x"))
            assert result.status is PutStatus.MESSAGE_ILLEGAL
            assert result.remark
            assert store.queues() == {}
            assert store.max_commit_log_offset == 0

    async def test_topic_over_255_bytes_is_illegal(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            result = await store.put(make_message("t" * 256, 0, b"x"))
            assert result.status is PutStatus.MESSAGE_ILLEGAL
            assert store.queues() == {}
            assert store.max_commit_log_offset == 0

    # --- transactions -----------------------------------------------------------------------

    @pytest.mark.parametrize(
        "kind", [TRANSACTION_PREPARED, TRANSACTION_ROLLBACK], ids=["prepared", "rollback"]
    )
    async def test_prepared_and_rollback_records_are_in_no_queue(
        self, store_factory, tmp_path, kind
    ):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message("T", 0, b"normal"))
            result = await store.put(make_message("T", 0, b"half", sys_flag=kind))
            assert result.status is PutStatus.PUT_OK
            assert result.queue_offset == 0
            record = await store.message_at(result.commit_log_offset)
            assert store.max_offset("T", 0) == 1
            found = await read_queue(store, "T", 0)
            after = await store.put(make_message("T", 0, b"next"))
        stored = decode_record(bytes(record), check_crc=True)
        assert (stored.body, stored.sys_flag & TRANSACTION_MASK) == (b"half", kind)
        assert stored.queue_offset == 0
        assert [decode_record(r).body for _, r in found] == [b"normal"]
        assert after.queue_offset == 1

    async def test_queue_with_only_prepared_records_is_not_listed(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message("Real", 0, b"x"))
            await store.put(make_message("Half", 0, b"p", sys_flag=TRANSACTION_PREPARED))
            await store.put(make_message("Half", 1, b"r", sys_flag=TRANSACTION_ROLLBACK))
            assert store.queues() == {"Real": [0]}
            assert store.max_offset("Half", 0) == 0
            result = await store.get("Half", 0, 0, 32)
            assert result.status is GetStatus.NO_MESSAGE_IN_QUEUE

    async def test_commit_record_enters_its_queue(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            await store.put(make_message("T", 0, b"normal"))
            half = await store.put(make_message("T", 0, b"half", sys_flag=TRANSACTION_PREPARED))
            commit = await store.put(
                make_message(
                    "T",
                    0,
                    b"commit",
                    sys_flag=TRANSACTION_COMMIT,
                    prepared_transaction_offset=half.commit_log_offset,
                )
            )
            result = await store.get("T", 0, 0, 32)
        assert commit.queue_offset == 1
        normal, committed = decode_all(result)
        assert (normal.body, committed.body) == (b"normal", b"commit")
        assert committed.sys_flag & TRANSACTION_MASK == TRANSACTION_COMMIT
        assert committed.prepared_transaction_offset == half.commit_log_offset
        assert result.queue_offsets == [0, 1]

    async def test_rollback_records_are_not_indexed(self, store_factory, tmp_path):
        async with self.open_store(store_factory, tmp_path / "store") as store:
            kinds = {"P": TRANSACTION_PREPARED, "R": TRANSACTION_ROLLBACK}
            for name, kind in kinds.items():
                await store.put(make_message("T", 0, name.encode(), keys=name, sys_flag=kind))
            prepared = await store.query_by_key("T", "P", 32, 0, 2**62)
            rolled_back = await store.query_by_key("T", "R", 32, 0, 2**62)
        assert bodies(prepared) == [b"P"]
        assert rolled_back.records == []

    # --- concurrency ------------------------------------------------------------------------

    @pytest.mark.parametrize("flush", ["async", "sync"])
    async def test_concurrent_putters_keep_queue_order(self, store_factory, tmp_path, flush):
        putters, puts = 20, 50
        offsets: dict[tuple[int, int], int] = {}
        async with self.open_store(store_factory, tmp_path / "store", flush=flush) as store:

            async def putter(number: int) -> None:
                for index in range(puts):
                    message = make_message("C", number % 4, f"{number}:{index}".encode())
                    result = await store.put(message)
                    assert result.status is PutStatus.PUT_OK
                    offsets[(number, index)] = result.queue_offset

            with anyio.fail_after(60):
                async with anyio.create_task_group() as task_group:
                    for number in range(putters):
                        task_group.start_soon(putter, number)
            queues = {queue_id: await read_queue(store, "C", queue_id) for queue_id in range(4)}
        for queue_id, found in queues.items():
            assert [offset for offset, _ in found] == list(range(putters * puts // 4))
            order: dict[int, list[int]] = {}
            for offset, record in found:
                number, index = map(int, decode_record(record).body.split(b":"))
                assert number % 4 == queue_id
                assert offsets[(number, index)] == offset
                order.setdefault(number, []).append(index)
            assert all(indexes == list(range(puts)) for indexes in order.values())
            assert len(order) == putters // 4
