"""The compiled append writes what the Python path writes, byte for byte.

Two stores take the same puts at the same store times, one with the kernel and one
with ``kernel = None`` (the Python path, the reference), and must end with the same
files and answer the same results. The puts cover the usual case and every way out of
it: new queues, files that roll, long and non-ASCII topics, IPv6 hosts, transactions,
a given tags code, odd properties and refusals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import zlib
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_store_mmap import index, record_requests
from rocketmq_store_mmap import store as mmap_store

from rocketmq_core.errors import StoreError
from rocketmq_core.protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    RecordError,
    pack_host,
    tags_code_of,
)
from rocketmq_core.store.api import DispatchRequest, MessageToStore, ReplicationError, StoreConfig
from rocketmq_core.store.loader import create_store
from rocketmq_core.store.rules import StoreClock
from tests.missing import missing

STAMP = 1_700_000_000_000
V4_HOST = pack_host("10.1.2.3", 5000)
V6_HOST = pack_host("fe80::1", 5000)
KEYED = b"KEYS\x01k1"  # the first keyed put makes the index file the kernel needs


def kernel():
    if mmap_store.append_kernel is None:
        missing("rocketmq_store_mmap._append is not built: reinstall the plugin with a C compiler")
    return mmap_store.append_kernel


class SetClock(StoreClock):
    """The store time a test chose for the next put."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        super().__init__()
        self.at = STAMP

    def next(self) -> int:
        return max(self.last, self.at)


def test_the_kernel_is_built():
    assert callable(kernel())


def test_a_call_with_the_wrong_queue_arguments_is_a_type_error_not_a_crash():
    buffer = bytearray(4096)
    rest = ([], 0, buffer, 0, 0, 0, None, 0, None)
    with pytest.raises(TypeError, match="tuple of 9"):
        kernel()(("Orders", b"Orders"), *rest)
    with pytest.raises(TypeError, match="topic a str"):
        kernel()((b"Orders", b"Orders", 0, 0, V4_HOST, 1024, 8, 8, len), *rest)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), start=st.integers(0, 2**32 - 1))
def test_its_crc32_is_zlibs(data, start):
    from rocketmq_store_mmap._append import crc32

    kernel()
    assert crc32(data, start) == zlib.crc32(data, start)
    assert crc32(data) == zlib.crc32(data)


def test_its_crc32_is_zlibs_at_every_length_and_alignment():
    """Lengths around the 64- and 16-byte steps of the carry-less path (used from 64
    bytes when the CPU has it) and unaligned starts, as records sit in a mapped file."""
    from rocketmq_store_mmap._append import crc32

    kernel()
    data = bytes((number * 131 + 7) & 0xFF for number in range(5000))
    for length in [*range(200), 1023, 1024, 1025, 4096, 4999]:
        for skip in (0, 1, 3, 15):
            piece = memoryview(data)[skip : skip + length]
            assert crc32(piece, 0x1234ABCD) == zlib.crc32(piece, 0x1234ABCD), (length, skip)
            assert crc32(piece) == zlib.crc32(piece), (length, skip)


# --- messages --------------------------------------------------------------------------

# mostly the usual case, which the kernel takes; each way out of it now and then
TOPICS = st.sampled_from(["Orders"] * 5 + ["Ünïcode-Topic", "T" * 130, "Other"])
NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", ""])
MANY_KEYS = " ".join(f"k{number}" for number in range(20))  # more than the C path holds
VALUES = st.sampled_from(
    ["", "TagA", "标签", "k1", "k1 k2", " k1  k2 ", "order-7 order-8 order-9", "x" * 40, MANY_KEYS]
)


@st.composite
def properties(draw) -> bytes:
    pairs = draw(st.lists(st.tuples(NAMES, VALUES), max_size=5))
    text = "\x02".join(f"{name}\x01{value}" for name, value in pairs)
    if draw(st.booleans()) and text:
        text += "\x02tail-without-value"
    return text.encode()


@st.composite
def messages(draw, topic: str, queue_id: int) -> MessageToStore:
    return MessageToStore(
        topic,
        queue_id,
        draw(st.binary(max_size=600)),
        draw(properties()),
        flag=draw(st.sampled_from([0, 1, -5, 2**31 - 1])),
        sys_flag=draw(
            st.sampled_from(
                [0] * 6 + [1, TRANSACTION_COMMIT, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK]
            )
        ),
        born_timestamp=draw(st.sampled_from([0, STAMP - 5])),
        born_host=draw(st.sampled_from([V4_HOST] * 6 + [V6_HOST])),
        reconsume_times=draw(st.sampled_from([0, 3])),
        tags_code=draw(st.sampled_from([None, None, None, 42, STAMP + 10_000])),
    )


@st.composite
def puts(draw) -> tuple[int, list[MessageToStore]]:
    """(time step, messages): one message for a put, several for a batch."""
    topic = draw(TOPICS)
    queue_id = draw(st.sampled_from([0, 1, 2]))
    count = draw(st.sampled_from([1, 1, 2, 5]))
    batch = [draw(messages(topic, queue_id)) for _ in range(count)]
    if draw(st.integers(0, 29)) == 0:  # refused: too big
        batch[-1] = MessageToStore(topic, queue_id, b"x" * 5000, b"TAGS\x01A")
    return draw(st.sampled_from([0, 1, 999, 1500])), batch


def config(root: Path) -> StoreConfig:
    # small files, so that CommitLog, consume-queue and index files roll mid-run
    return StoreConfig(
        root_dir=str(root),
        commit_log_file_size=32 * 1024,
        consume_queue_file_size=20 * 7,
        max_hash_slot_num=16,
        max_index_num=24,
        max_message_size=4096,
    )


def run(root: Path, script: list[tuple[int, list[MessageToStore]]], compiled: bool) -> list:
    async def main() -> list:
        store = create_store("mmap", config(root))
        if not compiled:
            store.kernel = None
        clock = store.clock = SetClock()
        await store.open()
        answers = []
        try:
            for step, batch in script:
                clock.at += step
                if len(batch) == 1:
                    answers.append(await store.put(batch[0]))
                else:
                    answers.append(await store.put_batch(batch))
            answers.append(store.stats().get("puts"))
        finally:
            await store.close()
        return answers

    return anyio.run(main)


def contents(root: Path) -> dict[str, bytes]:
    """Every file of the store by path; index files (named by the wall clock) by rank.
    A CommitLog file that holds only zeros is left out: the store makes the next file
    ahead of need, in the background, so whether it exists yet is a matter of timing."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in sorted(names):
            path = Path(directory) / name
            relative = path.relative_to(root)
            if relative.parts[0] == "index":
                relative = Path("index", str(sorted(os.listdir(path.parent)).index(name)))
            if relative.parts[0] == "lock":
                continue
            data = path.read_bytes()
            if relative.parts[0] == "commitlog" and not any(data):
                continue
            found[str(relative)] = data
    return found


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(puts(), min_size=5, max_size=60))
def test_the_kernel_writes_what_the_python_path_writes(tmp_path_factory, script):
    kernel()
    compiled_root = tmp_path_factory.mktemp("compiled")
    python_root = tmp_path_factory.mktemp("python")
    assert run(compiled_root, script, True) == run(python_root, script, False)
    compiled, python = contents(compiled_root), contents(python_root)
    assert compiled.keys() == python.keys()
    for name in compiled:
        assert compiled[name] == python[name], name


def test_usual_puts_go_through_the_kernel(tmp_path):
    """The figures of benchmarks/store_append.py depend on it: after a queue's first
    put, a usual put takes append_one and a usual batch the kernel, not the Python path."""
    kernel()

    async def main() -> None:
        store = create_store("mmap", config(tmp_path))
        await store.open()
        calls = []

        def counted(*args):
            calls.append(len(args[1]))  # (queue, messages, ...)
            return mmap_store.append_kernel(*args)

        def counted_one(*args):
            written = mmap_store.append_one_kernel(*args)
            calls.append("one" if written is not None else "not usual")
            return written

        store.kernel = counted
        store._append_one = counted_one
        message = MessageToStore("Orders", 0, b"body", b"TAGS\x01A\x02KEYS\x01k1 k2")
        try:
            await store.put(message)  # the queue's first put: its files are made
            calls.clear()
            assert (await store.put(message)).ok
            assert (await store.put_batch([message] * 3)).ok
            assert calls == ["one", 3]
            found = await store.get("Orders", 0, 0, 10)
            assert len(found.records) == 5
            keyed = await store.query_by_key("Orders", "k2", 10, 0, 2**62)
            assert len(keyed.records) == 5
        finally:
            await store.close()

    anyio.run(main)


def test_a_live_max_message_size_reaches_the_kernel(tmp_path):
    """UPDATE_BROKER_CONFIG maxMessageSize: the broker sets the store's config and tells
    it (``live_config_changed``); the kernel's cached arguments follow, both ways."""
    kernel()

    async def main() -> None:
        store = create_store("mmap", config(tmp_path))
        await store.open()
        calls = []

        def counted(*args):
            written = mmap_store.append_one_kernel(*args)
            calls.append(written is not None)
            return written

        store._append_one = counted
        try:
            assert (await store.put(MessageToStore("Live", 0, b"x" * 100, KEYED))).ok  # cached
            store.config.max_message_size = 8000
            store.live_config_changed()
            calls.clear()
            assert (await store.put(MessageToStore("Live", 0, b"x" * 6000, KEYED))).ok
            assert calls == [True]  # append_one took it, no fall back to the Python path
            store.config.max_message_size = 50
            store.live_config_changed()
            refused = await store.put(MessageToStore("Live", 0, b"x" * 100))
            assert refused.status.name == "MESSAGE_ILLEGAL", refused
        finally:
            await store.close()

    anyio.run(main)


class HeldPull:
    """Another dispatcher, as a held pull is: it wants one queue's records only."""

    def __init__(self) -> None:
        self.heard: list[DispatchRequest] = []

    def wants(self, topic: str, queue_id: int) -> bool:
        return queue_id == 1

    def __call__(self, request: DispatchRequest) -> None:
        self.heard.append(request)


# WAIT as clients write it and as they may: Java waits for "true" in any case, or none
WAITS = ["\x02WAIT\x01false", "\x02WAIT\x01true", "\x02WAIT\x01FALSE", "\x02WAIT\x01True",
         "\x02WAIT\x010", "\x02WAIT\x01", ""]  # fmt: skip


def single_puts(root: Path, compiled: bool, stepped: bool = False) -> tuple[list, list, int]:
    """Single puts, as the send path makes them (``append``, flush ``sync``): the
    answers, what the other dispatcher heard, and how many append_one wrote. ``stepped``:
    each put a millisecond after the one before (else all at one store time)."""
    messages = [
        MessageToStore(
            "Orders" if number % 7 else "Other",
            number % 3,
            bytes([number % 251]) * (number * 37 % 900),
            (
                f"TAGS\x01Tag{number % 4}\x02KEYS\x01order-{number} k{number % 5}"
                f"\x02UNIQ_KEY\x01{number:032X}" + WAITS[number % len(WAITS)]
            ).encode(),
            born_host=V4_HOST,
        )
        for number in range(400)
    ]

    async def main() -> tuple[list, list, int]:
        store = create_store("mmap", dataclasses.replace(config(root), flush="sync"))
        if not compiled:
            store.kernel = None
        # a last store time ahead of the wall clock: the compiled StoreClock.next() and
        # the Python one both give it, so that the two runs stamp the same times
        store.clock = clock = SetClock() if stepped else StoreClock(last=4_000_000_000_000)
        pull = HeldPull()
        store.add_dispatcher(pull)
        await store.open()
        written = 0
        one = store._append_one

        def counted(*args):
            nonlocal written
            answer = one(*args)
            written += answer is not None
            return answer

        if one is not None:
            store._append_one = counted
        try:
            answers = []
            for message in messages:
                if isinstance(clock, SetClock):
                    clock.at = STAMP + len(answers)
                answers.append(store.append(message))
            answers.append(store.stats()["puts"])
        finally:
            await store.close()
        return answers, pull.heard, written

    return anyio.run(main)


def test_single_puts_by_append_one_are_the_python_paths(tmp_path):
    """append_one (a whole single put in C) against the Python path: the same files, the
    same answers (flush_to by the WAIT property), the same records told to a dispatcher
    that wants some queues; it takes most puts, the rest (files to make or roll) fall
    back."""
    kernel()
    compiled_answers, compiled_heard, written = single_puts(tmp_path / "compiled", True)
    python_answers, python_heard, _ = single_puts(tmp_path / "python", False)
    assert written > 200  # of 400: small files, which roll often
    assert compiled_answers == python_answers
    assert compiled_heard == python_heard and len(python_heard) > 100
    # the puts that wait: "true" in any case, or no WAIT at all (store.rules.waits_for_store)
    waited = [answer.flush_to > 0 for answer in python_answers[:-1]]
    assert waited == [WAITS[n % len(WAITS)].lower() in ("\x02wait\x01true", "") for n in range(400)]
    compiled, python = contents(tmp_path / "compiled"), contents(tmp_path / "python")
    assert compiled.keys() == python.keys()
    for name in compiled:
        assert compiled[name] == python[name], name


# --- a slave's dispatch: replica_dispatch against the Python dispatch --------------------

FEEDS = (1, 7, 150, 4096, 900, 13, 32_768)  # odd reads: records split anywhere


@contextlib.contextmanager
def all_python(compiled: bool):
    """With ``compiled`` False, no compiled helper at all in a slave's dispatch (not the
    record reader nor the index writer, which replica_dispatch shares code with)."""
    saved = record_requests.compiled_reader, index.compiled_index_keys
    if not compiled:
        record_requests.compiled_reader = index.compiled_index_keys = None
    try:
        yield
    finally:
        record_requests.compiled_reader, index.compiled_index_keys = saved


@dataclasses.dataclass
class Replica:
    heard: list  # what a dispatcher that wants some queues was told
    taken: int  # records the compiled dispatch took
    next_offsets: dict  # each queue's next offset, and the store clock, at the end
    clock: int
    refused: str | None = None  # the ReplicationError a failing dispatcher caused
    at_refusal: tuple = ()  # the next offsets and the clock just after it


def replica(
    master_root: Path, root: Path, compiled: bool, failing: FailingDispatcher | None = None
) -> Replica:
    """A slave store fed the master's whole CommitLog in odd chunks, as an HA connection
    feeds it, closed and opened again halfway (the index goes on past ``indexed_below``).
    With ``failing``, a dispatcher that refuses one record: the feed then resumes from
    where the slave's log ends, as the master would send it again."""

    async def feed(slave, master, result: Replica, until: int) -> None:
        feeds = iter(FEEDS * 10_000)
        offset = slave.max_commit_log_offset or master.min_commit_log_offset
        while offset < until:
            data = master.read_commit_log(offset, min(next(feeds), until - offset))
            try:
                slave.append_replicated(offset, data)
            except ReplicationError as exc:
                assert result.refused is None, "refused twice"
                result.refused = str(exc)
                result.at_refusal = (state_of(slave), slave.clock.last)
                offset = slave._replica.whole_end
                continue
            offset += len(data)

    async def opened_slave(result: Replica):
        slave = create_store("mmap", config(root))
        if not compiled:
            slave.kernel = None
        pull = HeldPull()
        pull.heard = result.heard
        slave.add_dispatcher(pull)
        if failing is not None:
            slave.add_dispatcher(failing)
        await slave.open()
        run = slave._dispatch_replicated_run

        def counted(*args):
            done = run(*args)
            result.taken += done
            return done

        slave._dispatch_replicated_run = counted
        return slave

    async def main() -> Replica:
        result = Replica([], 0, {}, 0)
        master = create_store("mmap", config(master_root))
        await master.open()
        try:
            for until in (master.max_commit_log_offset // 2, master.max_commit_log_offset):
                slave = await opened_slave(result)
                try:
                    await feed(slave, master, result, until)
                    result.next_offsets = state_of(slave)
                    result.clock = slave.clock.last
                finally:
                    await slave.close()
        finally:
            await master.close()
        return result

    with all_python(compiled):
        return anyio.run(main)


def state_of(slave) -> dict:
    """Each loaded queue's next offset."""
    return {key: queue.next_offset for key, queue in slave._queues.items()}


def assert_same_files(compiled_root: Path, python_root: Path) -> None:
    compiled, python = contents(compiled_root), contents(python_root)
    assert compiled.keys() == python.keys()
    for name in compiled:
        assert compiled[name] == python[name], name


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(puts(), min_size=5, max_size=60))
def test_a_replica_dispatched_in_c_equals_one_dispatched_in_python(tmp_path_factory, script):
    """Two slaves of one master, one dispatching the usual records in C (replica_dispatch)
    and one all in Python (the reference): the same files (consume queues, index,
    checkpoint), the same queue offsets and clock, the same records told to a dispatcher
    that wants some queues (and no other). The master's puts cover the ways out of the usual case
    (non-ASCII tags and topics, transactions, many keys, new queues, files that roll)."""
    kernel()
    master = tmp_path_factory.mktemp("master")
    run(master, script, True)
    compiled_root = tmp_path_factory.mktemp("compiled")
    python_root = tmp_path_factory.mktemp("python")
    compiled = replica(master, compiled_root, True)
    python = replica(master, python_root, False)
    assert python.taken == 0
    assert compiled.heard == python.heard
    assert (compiled.next_offsets, compiled.clock) == (python.next_offsets, python.clock)
    assert_same_files(compiled_root, python_root)


class FailingDispatcher:
    """A dispatcher that refuses the record at one CommitLog offset, once."""

    def __init__(self, offset: int, error: Exception) -> None:
        self.offset = offset
        self.error: Exception | None = error

    def __call__(self, request: DispatchRequest) -> None:
        if request.commit_log_offset == self.offset and self.error is not None:
            error, self.error = self.error, None
            raise error


@pytest.mark.parametrize(
    "error",
    [StoreError("no room"), OSError(28, "No space left on device"), RecordError("garbled")],
    ids=["StoreError", "OSError", "RecordError"],
)
def test_a_dispatcher_refusing_a_replicated_record_leaves_what_the_python_path_leaves(
    tmp_path, error
):
    """A record another dispatcher refuses, in the middle of a run the compiled dispatch
    takes: the log is cut at that record, the same error says so, and fed again from
    there both slaves end as equals (its entries written once; the offsets and clock)."""
    kernel()
    answers, _, _ = single_puts(tmp_path / "master", True, stepped=True)
    refused_at = answers[250].commit_log_offset
    compiled = replica(
        tmp_path / "master", tmp_path / "compiled", True, FailingDispatcher(refused_at, error)
    )
    python = replica(
        tmp_path / "master", tmp_path / "python", False, FailingDispatcher(refused_at, error)
    )
    assert compiled.taken > 250
    assert compiled.refused is not None and f"offset {refused_at}" in compiled.refused
    assert compiled.refused == python.refused
    assert compiled.at_refusal == python.at_refusal  # the refused record counts for neither
    assert compiled.heard == python.heard
    assert (compiled.next_offsets, compiled.clock) == (python.next_offsets, python.clock)
    assert_same_files(tmp_path / "compiled", tmp_path / "python")


def test_usual_replicated_records_go_through_the_compiled_dispatch(tmp_path):
    """The slave's figures (benchmarks/ha.py) depend on it: once a queue and its files are
    there, a replica's usual records take replica_dispatch."""
    kernel()
    single_puts(tmp_path / "master", True)
    slave = replica(tmp_path / "master", tmp_path / "slave", True)
    assert slave.taken > 250  # of 400: small files (7 entries a queue file) roll often
    assert len(slave.heard) > 100


# --- a read: gather against the Python loop of MmapStore.get ------------------------------

# the tags codes of single_puts' TAGS values, and one no record has
TAG_CODES = [tags_code_of(f"Tag{number}".encode()) for number in range(4)] + [-1]


@st.composite
def reads(draw) -> tuple:
    """(topic, queue id, offset, max count, tags, max bytes) of one get."""
    tags = draw(st.one_of(st.none(), st.frozensets(st.sampled_from(TAG_CODES), max_size=2)))
    return (
        draw(st.sampled_from(["Orders", "Other"])),
        draw(st.sampled_from([0, 1, 2])),
        draw(st.integers(-1, 130)),
        draw(st.sampled_from([1, 2, 5, 32, 64])),
        tags,
        draw(st.sampled_from([1, 700, 4096, 256 * 1024])),
    )


@pytest.fixture(scope="module", params=["all there", "older files deleted"])
def filled(request, tmp_path_factory) -> Path:
    """single_puts' store (records across CommitLog and consume-queue files); or that store
    after retention deleted all but its newest CommitLog file."""
    root = tmp_path_factory.mktemp("filled")
    single_puts(root, True)
    if request.param == "older files deleted":

        async def delete() -> None:
            store = create_store("mmap", config(root))
            await store.open()
            try:
                assert await store.delete_expired(now=10**12, force=True) > 0
            finally:
                await store.close()

        anyio.run(delete)
    return root


@settings(max_examples=40, deadline=None)
@given(asked=st.lists(reads(), min_size=1, max_size=20))
def test_reads_gathered_in_c_are_the_python_loops(filled, asked):
    """MmapStore.get with the compiled loop (gather) and with the Python one, on the same
    store: the same status, records, queue offsets, next offset and last examined position,
    for every tag filter, count and byte limit."""
    kernel()

    async def main() -> None:
        store = create_store("mmap", config(filled))
        await store.open()
        try:
            for topic, queue_id, drawn, *rest in asked:
                # from just below the queue's first offset to just past its end
                low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
                read = (topic, queue_id, low - 1 + drawn % (high - low + 3), *rest)
                store.kernel = None
                python = await store.get(*read)
                store.kernel = mmap_store.append_kernel
                compiled = await store.get(*read)
                assert compiled == python, read
        finally:
            await store.close()

    anyio.run(main)


def test_a_read_takes_the_compiled_loop(tmp_path):
    """The pull figures (benchmarks/vs_nats.py) depend on it."""
    kernel()
    single_puts(tmp_path, True)
    calls = []

    async def main() -> None:
        store = create_store("mmap", config(tmp_path))
        await store.open()
        gather = mmap_store.gather_kernel

        def counted(*args):
            calls.append(args[1])
            return gather(*args)

        mmap_store.gather_kernel = counted
        try:
            found = await store.get("Orders", 1, 0, 32)
        finally:
            mmap_store.gather_kernel = gather
            await store.close()
        assert found.records and calls

    anyio.run(main)
