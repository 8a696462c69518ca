"""The rocksdb store on a full disk: it opens read-only (RocksDB cannot open for writing
there), serves what it holds, refuses puts with the disk-full code and Java's remark,
and takes writes again once space is freed, with no restart. A write that finds the
disk full stops RocksDB's writes until it is reopened; the store reopens it too.

The volume is a small tmpfs mounted for the test (root only); where it cannot be, the
test skips locally and fails under CI (tests/missing.py).
"""

from __future__ import annotations

import errno
import inspect
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.message import decode_record, encode_properties, iter_records
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.store.api import MessageToStore, PutStatus, StoreConfig
from rocketmq_core.store.loader import create_store
from tests.broker.wire import pull_request, send_request
from tests.processes import StandaloneProcess, tmpfs

VOLUME_MB = 16
TOPIC = "Kept"
STORED = 20
JAVA_DISK_FULL = (
    "service not available now. It may be caused by one of the following reasons:"
    " the broker's disk is full ["
)


@pytest.fixture
def volume(tmp_path):
    with tmpfs(tmp_path / "volume", VOLUME_MB) as point:
        yield point


def fill(volume: Path, leave: int = 0) -> Path:
    """A file that takes the volume's free space, all of it or all but ``leave`` bytes."""
    filler = volume / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for chunk in (1 << 20, 4096, 1):
            while True:
                free = shutil.disk_usage(volume).free - leave
                if free < chunk:
                    break
                try:
                    handle.write(bytes(chunk))
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return filler


def message(number: int, size: int = 200) -> MessageToStore:
    properties = encode_properties({"TAGS": "kept", "KEYS": f"key-{number}"})
    body = (b"message %05d " % number).ljust(size, b".")
    return MessageToStore(TOPIC, 0, body, properties=properties.encode())


# a writer whose last run ends as asked: closed, or killed with everything still in
# RocksDB's write-ahead log and memtables (nothing flushed to table files)
WRITER = f"""
import os, sys, anyio
from rocketmq_core.protocol.message import encode_properties
from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store
TOPIC, STORED = {TOPIC!r}, {STORED}
{inspect.getsource(message)}
async def write():
    store = create_store("rocksdb", StoreConfig(root_dir=sys.argv[1]))
    await store.open()
    for number in range(STORED):
        assert (await store.put(message(number))).ok
    if sys.argv[2] == "killed":
        os.kill(os.getpid(), 9)
    await store.close()

anyio.run(write)
"""


def write_store(root: Path, ending: str) -> None:
    subprocess.run([sys.executable, "-c", WRITER, str(root), ending], check=False, timeout=30)


async def bodies(store, topic: str = TOPIC) -> list[bytes]:
    found, offset = [], 0
    while (result := await store.get(topic, 0, offset, 64)).records:
        found += [decode_record(bytes(record)).body for record in result.records]
        offset = result.next_begin_offset
    return found


async def until_written(store, number: int, within: float):
    deadline = time.monotonic() + within
    while True:
        result = await store.put(message(number))
        if result.ok or time.monotonic() > deadline:
            return result
        await anyio.sleep(0.1)


@pytest.mark.anyio
@pytest.mark.parametrize("ending", ["closed", "killed"])
async def test_opens_read_only_on_a_full_disk_and_writes_once_space_is_freed(
    volume: Path, ending: str
) -> None:
    root = volume / "store"
    write_store(root, ending)
    filler = fill(volume)
    store = create_store("rocksdb", StoreConfig(root_dir=str(root)))
    await store.open()
    try:
        assert store.stats()["read_only"] is True
        assert store.stats()["recovered_after_crash"] is (ending == "killed")
        stored = [message(number).body for number in range(STORED)]
        assert await bodies(store) == stored
        assert (store.min_offset(TOPIC, 0), store.max_offset(TOPIC, 0)) == (0, STORED)
        found = await store.query_by_key(TOPIC, "key-7", 4, 0, 2**62)
        assert [decode_record(bytes(r)).body for r in found.records] == [stored[7]]
        assert await store.earliest_store_time(TOPIC, 0) > 0
        end = store.max_commit_log_offset

        refused = await store.put(message(STORED))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE, refused
        assert refused.remark.startswith(JAVA_DISK_FULL), refused.remark
        await store.delete_expired(force=True)  # no write while read-only: nothing goes
        assert await bodies(store) == stored

        filler.unlink()
        written = await until_written(store, STORED, within=8)
        assert written.ok, written
        assert store.stats()["read_only"] is False
        assert store.stats()["recovered_after_crash"] is (ending == "killed")
        # the write path goes on where the read-only store ended
        assert (written.queue_offset, written.commit_log_offset) == (STORED, end)
        assert await bodies(store) == [*stored, message(STORED).body]
    finally:
        await store.close()
    store = create_store("rocksdb", StoreConfig(root_dir=str(root)))
    await store.open()
    try:
        assert store.stats()["recovered_after_crash"] is False
        assert store.max_offset(TOPIC, 0) == STORED + 1
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_write_that_finds_the_disk_full_stops_writes_until_rocksdb_is_reopened(
    volume: Path,
) -> None:
    # warning at 99 %: puts reach RocksDB on a volume with 1 MiB left (94 % used)
    config = StoreConfig(root_dir=str(volume / "store"), disk_space_warning_level_ratio=99)
    store = create_store("rocksdb", config)
    await store.open()
    try:
        for number in range(3):
            assert (await store.put(message(number))).ok
        filler = fill(volume, leave=1 << 20)
        too_big = await store.put(message(3, size=2 << 20))
        assert too_big.status is PutStatus.CREATE_MAPPED_FILE_FAILED, too_big
        # RocksDB takes no write now, however small, until the store reopens it
        refused = await store.put(message(3))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE, refused
        assert refused.remark.startswith(JAVA_DISK_FULL), refused.remark
        filler.unlink()
        written = await until_written(store, 3, within=8)
        assert written.ok, written
        assert written.queue_offset == 3
        assert await bodies(store) == [message(number).body for number in range(4)]
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_topic_deleted_while_read_only_is_gone_after_the_reopen(volume: Path) -> None:
    root = volume / "store"
    write_store(root, "closed")
    filler = fill(volume)
    store = create_store("rocksdb", StoreConfig(root_dir=str(root)))
    await store.open()
    try:
        await store.delete_topic(TOPIC)
        assert store.queues() == {}
        filler.unlink()
        assert (await until_written(store, 0, within=8)).ok
        assert store.max_offset(TOPIC, 0) == 1  # a new queue: the old one was deleted
    finally:
        await store.close()


# the broker is a child process, the subject; the test's side is a RemotingClient
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_broker_on_a_full_disk_serves_pulls_refuses_sends_and_recovers(
    volume, tmp_path, plugin_host
):
    store = volume / "store"
    conf = f"storePathRootDir={store}\nlistenPort=0\nstore=rocksdb\n"
    broker = StandaloneProcess(tmp_path, conf)
    broker.start()
    try:
        async with RemotingClient(plugin_host.registry.transports.get("tcp")) as client:

            async def send(body: bytes):
                request = send_request(topic=TOPIC, body=body)
                return await client.invoke(broker.broker, request, timeout=5)

            async def pulled() -> list[bytes]:
                request = pull_request(topic=TOPIC, suspend=0)
                reply = await client.invoke(broker.broker, request, timeout=5)
                assert reply.code == ResponseCode.SUCCESS, reply.remark
                return [record.body for record in iter_records(reply.body)]

            for number in range(3):
                reply = await send(b"stored-%d" % number)
                assert reply.code == ResponseCode.SUCCESS, reply.remark
            await anyio.sleep(1.5)  # housekeeping writes the new topic to topics.json
            broker.kill()  # kill -9: the records are in RocksDB's log only
            filler = fill(volume)
            broker.start()
            assert "opening it read-only" in broker.output()
            assert await pulled() == [b"stored-0", b"stored-1", b"stored-2"]
            refused = await send(b"while full")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
            assert refused.remark.startswith(JAVA_DISK_FULL), refused.remark

            filler.unlink()
            deadline = time.monotonic() + 8
            while (reply := await send(b"space again")).code != ResponseCode.SUCCESS:
                assert time.monotonic() < deadline, reply.remark
                await anyio.sleep(0.1)
            assert (await pulled())[-1] == b"space again"
        assert broker.stop() == 0, broker.output()
    finally:
        broker.kill()


@pytest.mark.anyio
async def test_nothing_stays_open_when_open_fails(tmp_path: Path) -> None:
    """A store whose RocksDB holds an unreadable entry fails to open with one line, and
    leaves nothing behind: the database closed, its LOCK free, no abort marker."""
    import rocksdict

    from rocketmq_core.errors import ConfigError

    root = tmp_path / "store"
    write_store(root, "closed")
    db = rocksdict.Rdict(str(root / "db"), rocksdict.Options(raw_mode=True))
    db.get_column_family("meta")[b"q\x00"] = b"?"  # a queue name key cut short
    db.close()
    del db

    store = create_store("rocksdb", StoreConfig(root_dir=str(root)))
    with pytest.raises(ConfigError, match="holds a meta entry it cannot read"):
        await store.open()
    await store.close()
    assert not (root / "abort").exists()
    # RocksDB refuses a second open of a database this process holds: this one succeeds
    again = rocksdict.Rdict(str(root / "db"), rocksdict.Options(raw_mode=True))
    assert again.get_column_family("meta")[b"q\x00"] == b"?"
    again.close()
