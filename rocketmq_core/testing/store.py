"""StoreConformance: the contract every MessageStore keeps (``store/api.py``; STORE.md §3-7,
§11, §12, §16; MESSAGE.md §1-2).

A store plugin subclasses it and adds only a factory::

    class TestMmapStoreConformance(StoreConformance):
        @pytest.fixture
        def store_factory(self, plugin_host):
            def factory(directory, **overrides):
                config = StoreConfig(root_dir=str(directory), **overrides)
                return create_store("mmap", config, plugin_host)

            return factory

The factory returns an unopened store built with ``create_store`` (a store built
without it has no consume queue); ``overrides`` are StoreConfig fields the tests choose:
small files so that they roll (``config_defaults``, applied to every store the suite
opens), ``flush``, ``file_reserved_time``, ``max_message_size``, ``store_host``.
Reopening a store means a new one from the factory on the same directory.

Knobs a subclass may turn:

- ``persistent = False``: a reopened store is empty; the reopen and crash tests assert it.
- ``crash_copy(source, target)``: what a crash leaves of a store that is still open. By
  default a copy of its directory taken while it is open (kill -9 with the page cache
  kept; under the ``sync`` flush every acknowledged message is on disk anyway).
- ``tear_tail(directory)``: damage the newest end of the log in such a copy and return
  True; the store must then recover a consistent prefix. The default returns False (not
  supported) and the torn-tail test checks the untouched copy instead.
- ``torn_tail_loss``: how many of the newest messages a torn tail may cost.

Every test runs on both anyio backends; none skips. The stateful test compares the store
with the MemoryStore model over random sequences of puts, batches, reads and reopens.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ..protocol.message import (
    BORNHOST_V6,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LENGTH,
    STOREHOST_V6,
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    StoredMessage,
    body_crc,
    decode_offset_msg_id,
    decode_record,
    encode_properties,
    host_is_v6,
    iter_records,
    offset_msg_id,
    pack_host,
    record_size,
    tags_code,
    write_record,
)
from ..store.api import (
    DispatchRequest,
    GetResult,
    GetStatus,
    MessageStore,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
    StoreClosedError,
    StoreConfig,
    SupportsFlush,
    TagFilter,
)

StoreFactory = Callable[..., MessageStore]  # factory(directory, **config_overrides)

# small files, so that CommitLog, consume-queue and index files roll and chains share slots
SMALL_FILES = {
    "commit_log_file_size": 64 * 1024,
    "consume_queue_file_size": 20 * 100,
    "max_hash_slot_num": 256,
    "max_index_num": 512,
}
STORE_HOST = pack_host("192.168.0.1", 10911)
BORN_HOST = pack_host("10.0.0.7", 54321)
BORN_HOST_V6 = pack_host("fe80::7", 54321)
BORN_TIMESTAMP = 1_700_000_000_000
HOUR_MS = 3_600_000  # time-range margin: IndexFile entries keep seconds, not milliseconds
LONG_TOPIC = "%RETRY%" + "g" * 150  # over 127 bytes: stored as V2 records
TINY_RESERVED_TIME = 1e-9  # hours: everything but the newest file is expired


def quiet_cleanup() -> dict[str, Any]:
    """Files are deleted only when a test forces it: not at this hour of the day (the
    deleteWhen hour), not because the disk of the machine running the tests is well used."""
    return {
        "delete_when": f"{(time.localtime().tm_hour + 12) % 24:02d}",
        "disk_max_used_space_ratio": 100,
        "disk_space_clean_forcibly_ratio": 100,
    }


def expiry_config() -> dict[str, Any]:
    """Everything but the newest file is expired; deleted when a test forces it."""
    return {"file_reserved_time": TINY_RESERVED_TIME, **quiet_cleanup()}


# --- building, opening and reading -------------------------------------------------------------


@asynccontextmanager
async def opened_store(
    factory: StoreFactory, directory: Path, **overrides: Any
) -> AsyncIterator[MessageStore]:
    """A store from ``factory`` opened on ``directory`` for the block, closed after it."""
    store = factory(Path(directory), **overrides)
    await store.open()
    try:
        yield store
    finally:
        # no shielding scope here: a store may enter a task group in open() and leave it in
        # close(), which must then run at the same cancel-scope depth (it shields itself)
        await store.close()


def make_message(
    topic: str = "TopicTest",
    queue_id: int = 0,
    body: bytes = b"body",
    *,
    tags: str | None = None,
    keys: str | None = None,
    uniq_key: str | None = None,
    properties: dict[str, str] | None = None,
    **fields: Any,
) -> MessageToStore:
    """A message with TAGS/KEYS/UNIQ_KEY (and any other ``properties``) encoded."""
    pairs: dict[str, str] = {}
    if uniq_key is not None:
        pairs["UNIQ_KEY"] = uniq_key
    if tags is not None:
        pairs["TAGS"] = tags
    if keys is not None:
        pairs["KEYS"] = keys
    pairs.update(properties or {})
    fields.setdefault("born_timestamp", BORN_TIMESTAMP)
    fields.setdefault("born_host", BORN_HOST)
    return MessageToStore(topic, queue_id, body, encode_properties(pairs).encode(), **fields)


def decode_all(result: GetResult | QueryResult) -> list[StoredMessage]:
    """Every record of a result, each a whole record with a good body CRC."""
    return [decode_record(bytes(record), check_crc=True) for record in result.records]


def bodies(result: GetResult | QueryResult) -> list[bytes]:
    return [message.body for message in decode_all(result)]


def tag_filter(*tags: str) -> frozenset[int]:
    return frozenset(tags_code(tag) for tag in tags)


def int32(value: int) -> int:
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


async def read_queue(
    store: MessageStore,
    topic: str,
    queue_id: int,
    offset: int | None = None,
    tags: TagFilter = None,
) -> list[tuple[int, bytes]]:
    """(queue offset, record) of every entry from ``offset`` (the min offset) to the end."""
    offset = store.min_offset(topic, queue_id) if offset is None else offset
    found: list[tuple[int, bytes]] = []
    while True:
        result = await store.get(topic, queue_id, offset, 64, tags)
        if result.status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
            assert result.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE)
            return found
        assert result.next_begin_offset > offset, f"a read from {offset} made no progress"
        assert len(result.queue_offsets) == len(result.records)
        found += zip(result.queue_offsets, map(bytes, result.records), strict=True)
        offset = result.next_begin_offset


def assert_same_records(actual: Sequence[Any], expected: Sequence[Any], where: str) -> None:
    """Equal sequences of records (or (offset, record) pairs), failing with a short message."""
    assert len(actual) == len(expected), f"{where}: {len(actual)} records, not {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if got != want:
            raise AssertionError(f"{where}: item {index} differs: {_brief(got)} != {_brief(want)}")


def _brief(item: Any) -> str:
    if isinstance(item, tuple):
        return "(" + ", ".join(_brief(part) for part in item) + ")"
    if isinstance(item, bytes | bytearray | memoryview):
        data = bytes(item)
        return f"<{len(data)} bytes crc {zlib.crc32(data):08x}>"
    return repr(item)


# --- a workload of acknowledged messages -------------------------------------------------------


@dataclass(frozen=True)
class Acked:
    """A message the store acknowledged, and its record as the store then returned it."""

    topic: str
    queue_id: int
    commit_log_offset: int
    queue_offset: int | None  # None: in no consume queue (prepared)
    record: bytes = field(repr=False)
    keys: tuple[str, ...] = ()
    uniq_key: str | None = None


@dataclass
class Workload:
    acked: list[Acked] = field(default_factory=list)
    max_commit_log_offset: int = 0

    def queued(self) -> dict[tuple[str, int], list[Acked]]:
        """Each queue's acknowledged messages in queue order."""
        queues: dict[tuple[str, int], list[Acked]] = {}
        for acked in sorted(self.acked, key=lambda a: a.commit_log_offset):
            if acked.queue_offset is not None:
                queues.setdefault((acked.topic, acked.queue_id), []).append(acked)
        for entries in queues.values():
            entries.sort(key=lambda a: a.queue_offset)
        return queues

    def in_log_order(self) -> list[Acked]:
        return sorted(self.acked, key=lambda a: a.commit_log_offset)

    def topics(self) -> dict[str, list[int]]:
        result: dict[str, list[int]] = {}
        for topic, queue_id in self.queued():
            result.setdefault(topic, []).append(queue_id)
        return {topic: sorted(ids) for topic, ids in result.items()}


async def put_acked(store: MessageStore, message: MessageToStore) -> Acked:
    result = await store.put(message)
    assert result.status is PutStatus.PUT_OK, (result.status, result.remark)
    return await _acked(store, message, result.commit_log_offset, result.queue_offset)


async def put_batch_acked(store: MessageStore, messages: Sequence[MessageToStore]) -> list[Acked]:
    result = await store.put_batch(messages)
    assert result.status is PutStatus.PUT_OK, (result.status, result.remark)
    assert len(result.msg_ids) == len(messages)
    offsets = [decode_offset_msg_id(msg_id)[1] for msg_id in result.msg_ids]
    assert offsets[0] == result.commit_log_offset
    return [
        await _acked(store, message, offset, result.queue_offset + index)
        for index, (message, offset) in enumerate(zip(messages, offsets, strict=True))
    ]


async def _acked(
    store: MessageStore, message: MessageToStore, commit_log_offset: int, queue_offset: int
) -> Acked:
    record = await store.message_at(commit_log_offset)
    assert record is not None, f"no record at the acknowledged offset {commit_log_offset}"
    stored = decode_record(bytes(record), check_crc=True)
    queued = stored.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT)
    return Acked(
        message.topic,
        message.queue_id,
        commit_log_offset,
        queue_offset if queued else None,
        bytes(record),
        tuple(stored.keys),
        stored.properties.get("UNIQ_KEY"),
    )


# several putters, so that puts interleave (and share flushes under the sync policy); half of
# the messages go to Alpha/0, so its consume queue rolls with SMALL_FILES
WORKLOAD_LANES = (
    ("Alpha", 0),
    ("Alpha", 0),
    ("Alpha", 0),
    ("Alpha", 1),
    ("Beta", 0),
    ("Beta", 2),
    (LONG_TOPIC, 0),
    ("Alpha", 0),
)


def workload_message(number: int, topic: str, queue_id: int) -> MessageToStore:
    size = 100 + (number * 37) % 500
    return make_message(
        topic,
        queue_id,
        (f"{number:05d}-".encode() * (size // 6 + 1))[:size],
        tags=("A", "B", None)[number % 3],
        keys=f"key{number} group{number % 5}",
        uniq_key=f"{number:032X}",
        flag=number % 4,
        sys_flag=TRANSACTION_PREPARED if number % 13 == 6 else 0,
        born_host=BORN_HOST_V6 if number % 9 == 4 else BORN_HOST,
        reconsume_times=number % 3,
    )


async def put_workload(store: MessageStore, count: int = 240) -> Workload:
    """``count`` messages (and a few 3-message batches) over five queues, V2 topics, IPv6
    born hosts, prepared transaction records, tags and keys; every one acknowledged."""
    workload = Workload()

    async def lane(number: int) -> None:
        topic, queue_id = WORKLOAD_LANES[number]
        for index in range(number, count, len(WORKLOAD_LANES)):
            if index % 40 == 5:
                batch = [workload_message(index * 1000 + n, topic, queue_id) for n in range(3)]
                for message in batch:
                    message.sys_flag = 0
                workload.acked.extend(await put_batch_acked(store, batch))
            else:
                message = workload_message(index, topic, queue_id)
                workload.acked.append(await put_acked(store, message))

    async with anyio.create_task_group() as task_group:
        for number in range(len(WORKLOAD_LANES)):
            task_group.start_soon(lane, number)
    workload.max_commit_log_offset = store.max_commit_log_offset
    return workload


async def assert_holds(store: MessageStore, workload: Workload) -> None:
    """The store holds exactly the workload: gapless queues of the acknowledged records,
    byte-identical, every record at its CommitLog offset, nothing more."""
    expected = workload.queued()
    assert store.queues() == workload.topics()
    for (topic, queue_id), entries in expected.items():
        where = f"{topic[:20]}/{queue_id}"
        assert [acked.queue_offset for acked in entries] == list(range(len(entries))), where
        assert store.min_offset(topic, queue_id) == 0, where
        assert store.max_offset(topic, queue_id) == len(entries), where
        found = await read_queue(store, topic, queue_id)
        assert_same_records(found, [(a.queue_offset, a.record) for a in entries], where)
        for _offset, record in found:
            decode_record(record, check_crc=True)
    for acked in workload.acked:
        record = await store.message_at(acked.commit_log_offset)
        assert record is not None, f"no record at {acked.commit_log_offset}"
        assert_same_records([bytes(record)], [acked.record], f"at {acked.commit_log_offset}")
    assert await store.message_at(store.max_commit_log_offset) is None


async def assert_empty(store: MessageStore, workload: Workload) -> None:
    """A store that kept nothing of ``workload``."""
    assert store.queues() == {}
    assert store.stats()["messages"] == 0
    for topic, queue_id in workload.queued():
        assert store.max_offset(topic, queue_id) == 0
        result = await store.get(topic, queue_id, 0, 32)
        assert (result.status, result.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    for acked in workload.acked[:10]:
        assert await store.message_at(acked.commit_log_offset) is None


async def put_numbered(
    store: MessageStore, topic: str, queue_ids: Sequence[int], count: int, body_size: int = 100
) -> list[Acked]:
    """``count`` messages of ``body_size`` bytes, round robin over ``queue_ids``, one by one."""
    acked = []
    for number in range(count):
        body = (f"{number:05d}:".encode() * (body_size // 6 + 1))[:body_size]
        message = make_message(
            topic,
            queue_ids[number % len(queue_ids)],
            body,
            tags="A",
            keys=f"n{number}",
            uniq_key=f"{number:032X}",
        )
        acked.append(await put_acked(store, message))
    return acked


# the stateful comparison: a few dozen short random runs keep the whole suite fast
MODEL_CONFIG = {"max_message_size": 2048}  # bodies up to 2100 bytes: some are refused
MODEL_SETTINGS = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
MODEL_PLACES = [("Alpha", 0), ("Alpha", 1), ("Beta", 0), (LONG_TOPIC, 3)]
MODEL_FILTERS = [None, tag_filter("A"), tag_filter("B"), tag_filter("A", "C"), tag_filter("C")]
MODEL_KINDS = [TRANSACTION_NOT_TYPE] * 4 + [
    TRANSACTION_PREPARED,
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
]


# --- the conformance suite ---------------------------------------------------------------------


@pytest.mark.anyio
class StoreConformance:
    """Subclass it, give a ``store_factory`` fixture; see the module docstring."""

    persistent: bool = True  # False: reopening gives an empty store (and the tests assert it)
    torn_tail_loss: int = 3  # newest messages a torn tail may cost
    skips_unwanted_records: bool = False  # True: a dispatcher's ``wants`` is honoured
    config_defaults: dict[str, Any] = {"store_host": STORE_HOST, **SMALL_FILES}
    model_settings: settings = MODEL_SETTINGS  # of the stateful comparison with the model

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request):
        return request.param

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """factory(directory: Path, **config_overrides) -> an unopened MessageStore."""
        raise NotImplementedError("a conformance subclass provides the store_factory fixture")

    def crash_copy(self, source: Path, target: Path) -> None:
        """What a crash leaves of the store open on ``source``, made at ``target``."""
        if source.exists():
            shutil.copytree(source, target)
        else:  # a store that wrote no file leaves none
            target.mkdir(parents=True)

    def tear_tail(self, directory: Path) -> bool:
        """Damage the newest end of the log under ``directory``; False: not supported."""
        return False

    def open_store(
        self, factory: StoreFactory, directory: Path, **overrides: Any
    ) -> AbstractAsyncContextManager[MessageStore]:
        """``opened_store`` with ``config_defaults`` under the test's own overrides."""
        return opened_store(factory, directory, **{**self.config_defaults, **overrides})

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

    # --- the model ---------------------------------------------------------------------------

    def test_behaves_like_the_memory_model(
        self, store_factory, plugin_host, tmp_path, anyio_backend
    ):
        from ..store.loader import create_store

        def memory_factory(directory: Path, **overrides: Any) -> MessageStore:
            config = StoreConfig(root_dir=str(directory), **overrides)
            return create_store("memory", config, plugin_host)

        backend, options = (
            (anyio_backend, {}) if isinstance(anyio_backend, str) else tuple(anyio_backend)
        )
        # stateful machines are synchronous: the stores live in a portal's event loop
        with start_blocking_portal(backend, options) as portal:
            machine = model_machine(
                portal,
                store_factory,
                memory_factory,
                tmp_path,
                {**self.config_defaults, **MODEL_CONFIG},
                self.persistent,
            )
            run_state_machine_as_test(machine, settings=self.model_settings)


# --- the stateful comparison with the MemoryStore model ----------------------------------------


async def _own_store(
    factory: StoreFactory,
    directory: Path,
    overrides: dict[str, Any],
    *,
    task_status: TaskStatus[tuple[MessageStore, anyio.Event]],
) -> None:
    # one task opens and closes the store: a task group entered in open() must be left by
    # the task that entered it (trio insists)
    async with opened_store(factory, directory, **overrides) as store:
        stop = anyio.Event()
        task_status.started((store, stop))
        await stop.wait()


class _OwnedStore:
    """A store living in a blocking portal's event loop, called from the test's thread."""

    def __init__(
        self,
        portal: BlockingPortal,
        factory: StoreFactory,
        directory: Path,
        overrides: dict[str, Any],
    ) -> None:
        self.portal = portal
        self._done, (self.store, self._stop) = portal.start_task(
            _own_store, factory, directory, overrides
        )

    def call(self, method: Callable[..., Any], *args: Any) -> Any:
        return self.portal.call(method, *args)

    def snapshot(self, places: Iterable[tuple[str, int]]) -> dict[str, Any]:
        """queues() and every place's (min, max) offsets, read in one event-loop step."""

        def take() -> dict[str, Any]:
            offsets = {p: (self.store.min_offset(*p), self.store.max_offset(*p)) for p in places}
            return {"queues": self.store.queues(), "offsets": offsets}

        return self.portal.call(take)

    def close(self) -> None:
        self.portal.call(self._stop.set)
        self._done.result(timeout=30)


def describe(record: bytes | memoryview) -> tuple[Any, ...]:
    """What two stores must agree on about a record (not its CommitLog offset or time)."""
    m = decode_record(bytes(record), check_crc=True)
    return (
        m.size,
        m.magic,
        m.body_crc,
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.flag,
        m.sys_flag,
        m.born_timestamp,
        m.born_host,
        m.store_host,
        m.reconsume_times,
        m.prepared_transaction_offset,
        m.body,
        m.properties,
    )


def model_machine(
    portal: BlockingPortal,
    factory: StoreFactory,
    memory_factory: StoreFactory,
    root: Path,
    config: dict[str, Any],
    persistent: bool,
) -> type[RuleBasedStateMachine]:
    runs = itertools.count()

    class StoreMatchesModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            run = next(runs)
            self.directory = root / f"store{run}"
            self.model = _OwnedStore(portal, memory_factory, root / f"model{run}", config)
            try:
                self.store = _OwnedStore(portal, factory, self.directory, config)
            except BaseException:
                self.model.close()
                raise
            self.number = 0

        def teardown(self) -> None:
            try:
                self.store.close()
            finally:
                self.model.close()

        def message(self, place: tuple[str, int], size: int, tag: str | None, kind: int):
            self.number += 1
            number = self.number
            return make_message(
                *place,
                (number.to_bytes(4, "big") * (size // 4 + 1))[:size],
                tags=tag,
                keys=f"k{number % 7} n{number}",
                uniq_key=f"{number:032X}",
                sys_flag=kind,
                flag=number % 3,
                reconsume_times=number % 2,
                born_host=BORN_HOST_V6 if number % 5 == 0 else BORN_HOST,
            )

        def both(self, method: str, *args: Any) -> tuple[Any, Any]:
            copies = [dataclasses.replace(a) if isinstance(a, MessageToStore) else a for a in args]
            expected = self.model.call(getattr(self.model.store, method), *args)
            actual = self.store.call(getattr(self.store.store, method), *copies)
            return actual, expected

        @staticmethod
        def same_put(actual: PutResult, expected: PutResult) -> None:
            assert actual.status is expected.status, (actual.remark, expected.remark)
            if expected.status.stored:
                assert actual.queue_offset == expected.queue_offset
                assert len(actual.msg_ids) == len(expected.msg_ids)

        @rule(
            place=st.sampled_from(MODEL_PLACES),
            size=st.integers(0, 2100),
            tag=st.sampled_from(["A", "B", "C", None]),
            kind=st.sampled_from(MODEL_KINDS),
        )
        def put(self, place, size, tag, kind):
            self.same_put(*self.both("put", self.message(place, size, tag, kind)))

        @rule(
            place=st.sampled_from(MODEL_PLACES),
            items=st.lists(
                st.tuples(st.integers(0, 2100), st.sampled_from(["A", "B", None])),
                min_size=1,
                max_size=5,
            ),
            stray=st.sampled_from([None, None, None, ("Alpha", 2)]),
        )
        def put_batch(self, place, items, stray):
            batch = [self.message(place, size, tag, 0) for size, tag in items]
            if stray is not None:
                batch.append(self.message(stray, 1, None, 0))
            self.same_put(*self.both("put_batch", batch))

        @rule(
            data=st.data(),
            place=st.sampled_from([*MODEL_PLACES, ("Gamma", 0)]),
            count=st.integers(1, 10),
            tags=st.sampled_from(MODEL_FILTERS),
            max_bytes=st.sampled_from([1, 3000, 256 * 1024]),
        )
        def get(self, data, place, count, tags, max_bytes):
            top = self.model.call(self.model.store.max_offset, *place)
            offset = data.draw(st.integers(-1, top + 2), label="offset")
            actual, expected = self.both("get", *place, offset, count, tags, max_bytes)
            assert actual.status is expected.status
            assert actual.next_begin_offset == expected.next_begin_offset
            assert (actual.min_offset, actual.max_offset) == (
                expected.min_offset,
                expected.max_offset,
            )
            assert actual.queue_offsets == expected.queue_offsets
            assert [describe(r) for r in actual.records] == [describe(r) for r in expected.records]

        @precondition(lambda self: persistent)
        @rule()
        def reopen(self):
            self.store.close()
            self.store = _OwnedStore(portal, factory, self.directory, config)

        @invariant()
        def same_queues_and_offsets(self):
            places = [*MODEL_PLACES, ("Gamma", 0)]
            assert self.store.snapshot(places) == self.model.snapshot(places)

    return StoreMatchesModel
