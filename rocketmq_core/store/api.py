"""The MessageStore contract: what the broker needs from any store (STORE.md §3-5, §12, §16).

A store appends messages to one log in the stored-record layout, gives each a
per-queue offset, and serves them back as the stored bytes. Every store passes
``rocketmq_core.testing.store.StoreConformance``. Capabilities not every store has are
separate protocols (``SupportsFlush``, ``SupportsTopicDeletion``, ``ReplicationSource``,
``ReplicationTarget``); check with isinstance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from ..errors import StoreError
from ..protocol.codes import ResponseCode
from ..protocol.message import StoredMessage, encode_properties, offset_msg_id, pack_host


@dataclass(slots=True)
class MessageToStore:
    """One message as the broker hands it over (the send header plus the body)."""

    topic: str
    queue_id: int
    body: bytes
    properties: bytes = b""  # encoded properties string (MESSAGE.md §4), TAGS/KEYS/UNIQ_KEY
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = field(default_factory=lambda: pack_host("127.0.0.1", 0))
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # the consume-queue tag slot; None means the hash of TAGS (the delay scheduler puts
    # the delivery time here)
    tags_code: int | None = None

    @classmethod
    def again(
        cls,
        stored: StoredMessage,
        topic: str,
        queue_id: int,
        properties: Mapping[str, str],
        **changes: Any,
    ) -> MessageToStore:
        """A stored message put again, to ``topic`` and ``queue_id`` with ``properties``
        (delivered when due, retried, committed, copied): the same body, flag, sysFlag,
        born time and host, and reconsume count, unless ``changes`` says otherwise."""
        message = cls(
            topic,
            queue_id,
            stored.body,
            encode_properties(properties).encode(),
            stored.flag,
            stored.sys_flag,
            stored.born_timestamp,
            stored.born_host,
            stored.reconsume_times,
        )
        for name, value in changes.items():
            setattr(message, name, value)
        return message

    def parked(
        self, topic: str, queue_id: int, properties: dict[str, str], **changes: Any
    ) -> MessageToStore:
        """This message held in ``topic`` and ``queue_id`` until it is due or decided (a
        delay level, a timer, a transaction's half): where it really goes is kept in
        ``REAL_TOPIC`` and ``REAL_QID`` of ``properties``, which replace its own."""
        properties["REAL_TOPIC"] = self.topic
        properties["REAL_QID"] = str(self.queue_id)
        return dataclasses.replace(
            self,
            topic=topic,
            queue_id=queue_id,
            properties=encode_properties(properties).encode(),
            **changes,
        )


class PutStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def response_code(self) -> int:
        """What a send is answered with (STORE.md §3)."""
        return _RESPONSE_CODES[self]

    @property
    def stored(self) -> bool:
        """The message is in the log (a flush timeout still stored it)."""
        return self in _STORED


_RESPONSE_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.OS_PAGE_CACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}
_STORED = {
    PutStatus.PUT_OK,
    PutStatus.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class PutResult:
    status: PutStatus
    commit_log_offset: int = -1  # of the first record
    queue_offset: int = -1  # of the first record
    commit_log_offsets: list[int] = field(default_factory=list)  # one per record
    store_timestamp: int = 0
    remark: str = ""  # why, when the status is not PUT_OK: shown to the producer
    store_host: bytes = b""
    # the log offset ``put`` waits to be on disk before answering; -1: nothing to wait for
    flush_to: int = -1

    @classmethod
    def written(
        cls,
        commit_log_offsets: list[int],
        queue_offset: int,
        store_timestamp: int,
        store_host: bytes,
        flush_to: int = -1,
    ) -> PutResult:
        """PUT_OK: records appended at ``commit_log_offsets`` (one or more, in log order),
        the first at ``queue_offset`` of its queue."""
        return cls(
            PutStatus.PUT_OK,
            commit_log_offsets[0],
            queue_offset,
            commit_log_offsets,
            store_timestamp,
            "",
            store_host,
            flush_to,
        )

    @classmethod
    def refused(cls, status: PutStatus, remark: str) -> PutResult:
        """Nothing was written: ``status`` and the reason the producer is shown."""
        return cls(status, remark=remark)

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def msg_ids(self) -> list[str]:
        """The offset message ids of the records (built when asked: they cost)."""
        return [offset_msg_id(self.store_host, offset) for offset in self.commit_log_offsets]


class GetStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes | memoryview] = field(default_factory=list)  # stored bytes, as is
    queue_offsets: list[int] = field(default_factory=list)  # one per record
    # CommitLog offset of the last consume-queue entry looked at, matched or filtered out
    # (Java's maxPhyOffsetPulling); -1 when none was: how far behind the reader is
    last_examined_position: int = -1

    @property
    def body(self) -> bytes:
        """The pull response body: the records back to back."""
        return b"".join(self.records)


TagFilter = frozenset[int] | None  # tag hash codes a subscription accepts; None: all


@dataclass(slots=True)
class QueryResult:
    records: list[bytes | memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0


@dataclass(slots=True)
class DispatchRequest:
    """What dispatchers learn of each appended record (STORE.md §11)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str | None  # KEYS, space-separated
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int


Dispatcher = Callable[[DispatchRequest], None]
# A dispatcher may also have a ``wants`` QueueFilter (the long-polling service only needs
# the queues with a pull held): a store may then leave the records of the queues it does
# not want untold, and skip building their requests.
QueueFilter = Callable[[str, int], bool]  # (topic, queue_id) -> wanted


@dataclass
class StoreConfig:
    """What any store is told; store plugins read the keys they know (STORE.md §17)."""

    root_dir: str
    store_host: bytes = field(default_factory=lambda: pack_host("127.0.0.1", 10911))
    flush: str = "async"  # a flush policy name: "async" or "sync"
    sync_flush_timeout: float = 5.0  # seconds; then FLUSH_DISK_TIMEOUT
    flush_interval: float = 0.5  # seconds between async flush checks
    flush_least_pages: int = 4
    flush_thorough_interval: float = 10.0
    max_message_size: int = 4 * 1024 * 1024
    commit_log_file_size: int = 1024 * 1024 * 1024
    consume_queue_file_size: int = 6_000_000
    # consume-queue files mapped at once (mmap store); idle ones are unmapped
    max_mapped_consume_queue_files: int = 16_384
    # the mmap store faults its CommitLog in by 2 MiB folios (with async flush only)
    commit_log_huge_folios: bool = False
    # flushed CommitLog bytes further behind the flush than this leave the page cache
    # (mmap store; 0: the kernel decides)
    commit_log_page_cache_window: int = 0
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    file_reserved_time: float = 72.0  # hours
    delete_when: str = "04"  # hours of the day at which expired files are deleted
    disk_max_used_space_ratio: int = 75  # percent: above it, expired files go at any hour
    disk_space_clean_forcibly_ratio: int = 85  # percent: above it, oldest files go
    disk_space_warning_level_ratio: int = 90  # percent: above it, puts are refused
    check_crc_on_recover: bool = True
    extra: dict[str, Any] = field(default_factory=dict)  # plugin-specific settings


@runtime_checkable
class MessageStore(Protocol):
    """The narrow contract every store keeps. One event loop owns a store."""

    config: StoreConfig

    async def open(self) -> None:
        """Load or create the store under ``config.root_dir``; recover after a crash."""

    async def close(self) -> None:
        """Flush, persist and release everything; later calls raise ``StoreClosedError``."""

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        """``dispatcher(request)`` after each appended record, in log order, once; with
        a ``wants`` predicate, records of the queues it does not want may be skipped."""

    async def put(self, message: MessageToStore) -> PutResult:
        """Append one message; with the ``sync`` policy, return once it is on disk."""

    async def put_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Append messages of one queue together: all are stored, or none."""

    def append(self, message: MessageToStore) -> PutResult:
        """``put`` without the wait: the message is stored and readable on return;
        ``result.flush_to`` says what ``wait_durable`` would wait for. Lets a broker
        answer a send without a task when the flush policy has nothing to wait for."""

    def append_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        """``put_batch`` without the wait, as ``append``."""

    async def wait_durable(self, result: PutResult) -> PutResult:
        """Return ``result`` once its records are on disk up to ``result.flush_to``;
        FLUSH_DISK_TIMEOUT after the policy's timeout. At once when ``flush_to`` < 0."""

    async def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags: TagFilter = None,
        max_bytes: int = 256 * 1024,
    ) -> GetResult:
        """Up to ``max_count`` records from ``offset`` whose tags match (at least one
        record when any is available, even if it exceeds ``max_bytes``)."""

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The next offset to assign (0 for a queue never written)."""

    def queues(self) -> dict[str, list[int]]:
        """Every topic the store holds and its queue ids."""

    async def offset_by_time(
        self, topic: str, queue_id: int, timestamp: int, boundary: str = "lower"
    ) -> int:
        """``lower``: first offset stored at or after ``timestamp`` (max offset if none);
        ``upper``: last offset stored at or before it (min offset if none)."""

    async def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time of the message at the min offset; -1 if the queue is empty."""

    async def message_at(self, commit_log_offset: int) -> bytes | None:
        """The record at a CommitLog offset (VIEW_MESSAGE_BY_ID), None if there is none."""

    async def query_by_key(
        self, topic: str, key: str, max_count: int, begin: int, end: int
    ) -> QueryResult:
        """Records indexed under ``key`` (KEYS tokens, UNIQ_KEY) stored in [begin, end] ms,
        newest first; may include hash collisions, which clients filter."""

    async def delete_expired(self, now: float | None = None, force: bool = False) -> int:
        """Delete files older than ``file_reserved_time`` (``force``: whatever the hour
        and disk usage); never the newest data. Returns how many files went."""

    @property
    def min_commit_log_offset(self) -> int: ...

    @property
    def max_commit_log_offset(self) -> int: ...

    def stats(self) -> dict[str, Any]:
        """Counters for admin tools: messages, bytes, queues, flushes, disk use, ..."""


@runtime_checkable
class SupportsFlush(Protocol):
    async def flush(self) -> None:
        """Make everything appended so far durable."""


@runtime_checkable
class SupportsDurableCallback(Protocol):
    """A store that tells a callback when a put is durable (``wait_durable`` without a
    task waiting: the send processor answers a SYNC_FLUSH send from it)."""

    def when_durable(self, result: PutResult, settled: Callable[[PutResult], None]) -> bool:
        """True when ``result`` has nothing to wait for (``settled`` is not called); else
        False, and ``settled(result)`` later, as ``wait_durable`` would return it. It runs
        on the store's event loop and must not raise."""


@runtime_checkable
class SupportsImmediateGet(Protocol):
    """A store whose reads never wait: ``get``'s work without a coroutine (the pull
    processor answers then without a task per request)."""

    def get_now(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags: TagFilter = None,
        max_bytes: int = 256 * 1024,
    ) -> GetResult:
        """What ``get`` with the same arguments returns."""


class ImmediateGet:
    """Base of a store whose reads never wait: its ``get`` is its ``get_now``."""

    get_now: Callable[..., GetResult]

    async def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags: TagFilter = None,
        max_bytes: int = 256 * 1024,
    ) -> GetResult:
        return self.get_now(topic, queue_id, offset, max_count, tags, max_bytes)


@runtime_checkable
class SupportsTopicDeletion(Protocol):
    async def delete_topic(self, topic: str) -> None:
        """Forget a topic's queues (its records stay in the log until they expire)."""


@runtime_checkable
class HasConsumeQueues(Protocol):
    def put_position(self, request: DispatchRequest) -> None:
        """Add the record's consume-queue entry (the ``consume_queue`` dispatcher)."""


@runtime_checkable
class HasIndex(Protocol):
    def put_index(self, request: DispatchRequest) -> None:
        """Index the record's keys (the ``index`` dispatcher)."""


class StoreClosedError(StoreError, RuntimeError):
    """The store was closed; nothing more can be put or read."""


# --- replication (HA.md): a master's store reads its CommitLog out, a slave's writes it in ---


class ReplicationError(StoreError):
    """Replicated bytes that cannot go where they were sent (the wrong offset, across a
    file end, not records): nothing of them is kept; the slave re-reports its CommitLog
    end and the master sends again from there."""


@runtime_checkable
class ReplicationSource(Protocol):
    """A store whose CommitLog a master ships to its slaves byte for byte."""

    commit_log_file_size: int

    @property
    def min_commit_log_offset(self) -> int: ...

    @property
    def max_commit_log_offset(self) -> int: ...

    def read_commit_log(self, offset: int, max_bytes: int) -> bytes:
        """At most ``max_bytes`` raw CommitLog bytes from ``offset`` to the written end
        of the one file holding it (never across a file end); b"" when there are none
        (``offset`` at the end, or outside the files)."""


@runtime_checkable
class ReplicationTarget(Protocol):
    """A store a slave writes its master's CommitLog bytes into."""

    commit_log_file_size: int

    @property
    def max_commit_log_offset(self) -> int:
        """The raw end of the bytes written, an incomplete last record included: what the
        slave reports to its master."""

    def append_replicated(self, offset: int, data: bytes) -> None:
        """Write ``data`` at CommitLog ``offset`` as is (nothing parsed or re-stamped),
        then dispatch every record it completes, at the record's own queue offset; an
        incomplete record waits for the next call. ``offset`` must be the CommitLog's end
        (an empty store starts at the file boundary ``offset``). Raises
        ReplicationError, keeping nothing of ``data``, when it is not, when ``data``
        would cross a file end, or when the bytes are not records."""


def replication_refusal(store: object) -> str | None:
    """None if ``store`` can both ship and take a CommitLog; else why not, in one line."""
    if isinstance(store, ReplicationSource) and isinstance(store, ReplicationTarget):
        return None
    name = type(store).__name__.removesuffix("Store").lower()  # RocksDBStore: "rocksdb"
    return (
        f"the {name} store cannot replicate its CommitLog; use store=mmap for brokerRole"
        " SLAVE, or for SYNC_MASTER/ASYNC_MASTER with slaves"
    )
