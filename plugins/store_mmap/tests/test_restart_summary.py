"""A clean stop leaves a summary of every queue's ends (``queue_ends``): the next start
loads no idle queue, and answers for each exactly what a full load would. A crash, or a
summary that is damaged or was not written by the last stop, means a full load."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from rocketmq_store_mmap.mapped_file import SYNCFS_ABOVE

from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.message import decode_record
from rocketmq_core.store.api import GetStatus, MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

pytestmark = pytest.mark.anyio

TOPICS = 120


def config(directory: Path, **overrides) -> StoreConfig:
    options = dict(
        root_dir=str(directory),
        commit_log_file_size=64 << 10,
        consume_queue_file_size=20 * 1000,
        max_hash_slot_num=1024,
        max_index_num=4096,
        file_reserved_time=1e-6,  # hours: every file but the newest is expired at once
        delete_when="",
    )
    options.update(overrides)
    return StoreConfig(**options)


@asynccontextmanager
async def opened(directory: Path, plugin_host, **overrides):
    store = create_store("mmap", config(directory, **overrides), plugin_host)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def topic(number: int) -> str:
    return f"T{number:04d}"


def body(name: str, number: int) -> bytes:
    return b"%s-%d" % (name.encode(), number)


async def fill(root: Path, plugin_host, each: int = 3) -> dict:
    """TOPICS topics of one queue and one of two queues, ``each`` messages a queue;
    returns what the store answered for them before its clean stop."""
    async with opened(root, plugin_host) as store:
        for number in range(each):
            for name in [topic(t) for t in range(TOPICS)]:
                assert (await store.put(MessageToStore(name, 0, body(name, number)))).ok
            assert (await store.put(MessageToStore("Two", 1, body("Two", number)))).ok
        return answers(store)


def answers(store) -> dict:
    places = [(name, 0) for name in store.queues()] + [("Two", 1)]
    stats = store.stats()
    return {
        "queues": store.queues(),
        "offsets": {p: (store.min_offset(*p), store.max_offset(*p)) for p in places},
        "counts": (stats["topics"], stats["queues"], stats["messages"]),
    }


async def bodies(store, name: str, queue_id: int = 0) -> list[bytes]:
    found = await store.get(name, queue_id, 0, 100)
    return [decode_record(bytes(record), check_crc=True).body for record in found.records]


async def test_a_clean_restart_keeps_every_queue_dormant_and_answers_exactly(tmp_path, plugin_host):
    before = await fill(tmp_path, plugin_host)
    assert (tmp_path / "queue_ends").exists()
    async with opened(tmp_path, plugin_host) as store:
        assert not (tmp_path / "queue_ends").exists()  # a crash from now on never trusts it
        assert store.stats()["dormant_queues"] == TOPICS + 1  # no queue was loaded
        assert answers(store) == before
        assert await bodies(store, topic(7)) == [body(topic(7), n) for n in range(3)]
        assert store.stats()["dormant_queues"] == TOPICS  # the read loaded that one only
        put = await store.put(MessageToStore(topic(8), 0, b"more"))
        assert put.ok and put.queue_offset == 3  # offsets go on
        assert (await store.put(MessageToStore("Two", 1, b"more"))).queue_offset == 3
        assert (await store.put(MessageToStore("New", 0, b"first"))).queue_offset == 0
        assert await bodies(store, topic(8)) == [*(body(topic(8), n) for n in range(3)), b"more"]
        assert await store.offset_by_time(topic(9), 0, 0) == 0
        assert await store.earliest_store_time(topic(10), 0) > 0
        await store.delete_topic(topic(11))  # dormant: its files go all the same
        assert not (tmp_path / "consumequeue" / topic(11)).exists()
        assert topic(11) not in store.queues()
        assert store.max_offset(topic(11), 0) == 0
        after = answers(store)
        # one topic more (New) and one less (deleted); three messages more and three less
        assert after["counts"] == (TOPICS + 1, TOPICS + 1, 3 * (TOPICS + 1))
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["dormant_queues"] == TOPICS + 1
        assert answers(store) == after
        assert await bodies(store, topic(8)) == [*(body(topic(8), n) for n in range(3)), b"more"]
        assert await bodies(store, "New") == [b"first"]
        assert (await store.get(topic(11), 0, 0, 8)).status is GetStatus.NO_MESSAGE_IN_QUEUE


async def test_retention_loads_only_the_queues_it_changes(tmp_path, plugin_host):
    old = []
    async with opened(tmp_path, plugin_host) as store:
        for number in range(200):  # ~1 KiB each: a few 64 KiB CommitLog files
            result = await store.put(MessageToStore("Old", 0, b"o" * 1000 + b"%d" % number))
            old.append(result.commit_log_offset)
        assert (await store.put(MessageToStore("New", 0, b"new"))).ok
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["dormant_queues"] == 2
        await anyio.sleep(0.05)
        assert await store.delete_expired(force=True) > 0
        floor = store.min_commit_log_offset
        low = next(n for n, phys in enumerate(old) if phys >= floor)
        assert low > 0
        assert store.min_offset("Old", 0) == low  # loaded and cut as retention says
        assert store.stats()["dormant_queues"] == 1  # New's record is above the floor
        assert (store.min_offset("New", 0), store.max_offset("New", 0)) == (0, 1)
        found = await store.get("Old", 0, 0, 8)
        assert (found.status, found.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["dormant_queues"] == 2
        assert (store.min_offset("Old", 0), store.max_offset("Old", 0)) == (low, 200)
        found = await store.get("Old", 0, low, 1)
        assert decode_record(bytes(found.records[0])).body == b"o" * 1000 + b"%d" % low


async def test_a_crash_ignores_the_summary_even_where_it_is_left(tmp_path, plugin_host):
    await fill(tmp_path, plugin_host)
    stale = (tmp_path / "queue_ends").read_bytes()
    async with opened(tmp_path, plugin_host) as store:
        assert (await store.put(MessageToStore(topic(3), 0, b"later"))).ok
    # as a kill leaves it: the abort file, and beside it a summary of an older stop
    (tmp_path / "queue_ends").write_bytes(stale)
    (tmp_path / "abort").touch()
    async with opened(tmp_path, plugin_host) as store:
        stats = store.stats()
        assert stats["recovered_after_crash"] is True and stats["dormant_queues"] == 0
        assert store.max_offset(topic(3), 0) == 4
        assert (await bodies(store, topic(3)))[-1] == b"later"


WRITER = """
import sys, anyio
from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

async def main():
    store = create_store("mmap", StoreConfig(root_dir=sys.argv[1],
        commit_log_file_size=64 << 10, consume_queue_file_size=20 * 1000,
        max_hash_slot_num=1024, max_index_num=4096))
    await store.open()
    assert store.stats()["dormant_queues"] > 0
    for topic in range(5):
        assert (await store.put(MessageToStore(f"T{topic:04d}", 0, b"killed"))).ok
    await store.flush()
    print("ready", flush=True)
    await anyio.sleep(60)

anyio.run(main)
"""


async def test_a_kill_after_a_clean_start_reloads_every_queue(tmp_path, plugin_host):
    before = await fill(tmp_path, plugin_host)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline().strip() == b"ready"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert not (tmp_path / "queue_ends").exists()  # the start took it
    async with opened(tmp_path, plugin_host) as store:
        stats = store.stats()
        assert stats["recovered_after_crash"] is True and stats["dormant_queues"] == 0
        for number in range(TOPICS):
            expected = 4 if number < 5 else 3
            assert store.max_offset(topic(number), 0) == expected
        assert store.queues() == before["queues"]


@pytest.mark.parametrize("damage", ["flipped", "torn", "empty"])
async def test_a_damaged_summary_means_a_full_load(tmp_path, plugin_host, caplog, damage):
    before = await fill(tmp_path, plugin_host)
    summary = tmp_path / "queue_ends"
    data = bytearray(summary.read_bytes())
    if damage == "flipped":
        data[40] ^= 0x01
    elif damage == "torn":
        del data[len(data) // 2 :]
    else:
        data.clear()
    summary.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, "rocketmq.store.mmap"):
        async with opened(tmp_path, plugin_host) as store:
            assert store.stats()["dormant_queues"] == 0
            assert answers(store) == before
            assert await bodies(store, topic(5)) == [body(topic(5), n) for n in range(3)]
    assert "ignoring" in caplog.text and "queue_ends" in caplog.text


async def test_a_summary_of_another_stop_means_a_full_load(tmp_path, plugin_host):
    await fill(tmp_path, plugin_host)
    stale = (tmp_path / "queue_ends").read_bytes()
    async with opened(tmp_path, plugin_host) as store:
        assert (await store.put(MessageToStore(topic(2), 0, b"later"))).ok
        expected = answers(store)
    (tmp_path / "queue_ends").write_bytes(stale)  # valid, but of the stop before
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["dormant_queues"] == 0
        assert answers(store) == expected
    # a changed queue file size: the summary does not describe these files
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["dormant_queues"] == TOPICS + 1
    shutil.rmtree(tmp_path / "consumequeue")  # rebuilt from the CommitLog below
    (tmp_path / "checkpoint").unlink()
    async with opened(tmp_path, plugin_host, consume_queue_file_size=20 * 500) as store:
        assert store.stats()["dormant_queues"] == 0
        assert answers(store) == expected


async def test_many_dirty_queue_files_are_synced_at_once(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host) as store:
        for number in range(SYNCFS_ABOVE * 2):
            assert (await store.put(MessageToStore(topic(number), 0, b"x"))).ok
        dirty = [q for q in store._queues.values() if q.dirty_files()]
        assert len(dirty) > SYNCFS_ABOVE
        await store.flush()
        assert not [q for q in store._queues.values() if q.dirty_files()]


def held_paths(root: Path) -> list[str]:
    """Descriptors and mappings this process holds on files under ``root``."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    with open("/proc/self/maps") as maps:
        held.extend(line.split()[-1] for line in maps if len(line.split()) >= 6)
    return [path for path in held if path.startswith(str(root))]


async def test_a_failed_open_lets_go_of_everything_it_took(tmp_path, plugin_host):
    await fill(tmp_path, plugin_host)
    (tmp_path / "queue_ends").unlink()  # every queue is loaded, and one file is bad
    (tmp_path / "consumequeue" / topic(1) / "0" / f"{7:020d}").write_bytes(b"")
    store = create_store("mmap", config(tmp_path), plugin_host)
    with pytest.raises(ConfigError, match="not a multiple of the file size"):
        await store.open()
    assert held_paths(tmp_path) == []  # CommitLog, queue and index files closed
    with open(tmp_path / "lock", "rb+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free
        fcntl.flock(lock, fcntl.LOCK_UN)
    await store.close()  # harmless after a failed open
    (tmp_path / "consumequeue" / topic(1) / "0" / f"{7:020d}").unlink()
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["recovered_after_crash"] is True  # open never finished
        assert store.max_offset(topic(1), 0) == 3


async def test_a_queue_that_fails_to_wake_stays_dormant_and_keeps_its_offsets(
    tmp_path, plugin_host
):
    """A wake that fails (here a stray file in the queue's folder) leaves the queue as it
    was: its ends still answer, and once the cause is gone the next put continues its
    offsets instead of starting the queue again at 0 over its files."""
    async with opened(tmp_path, plugin_host) as store:
        for number in range(5):
            assert (await store.put(MessageToStore("Woken", 0, body("Woken", number)))).ok
    stray = tmp_path / "consumequeue" / "Woken" / "0" / "123"
    stray.write_bytes(b"")
    async with opened(tmp_path, plugin_host) as store:
        with pytest.raises(ConfigError, match="not a multiple of the file size"):
            await store.get("Woken", 0, 0, 10)
        assert (store.min_offset("Woken", 0), store.max_offset("Woken", 0)) == (0, 5)
        assert store.queues() == {"Woken": [0]}
        stray.unlink()
        put = await store.put(MessageToStore("Woken", 0, b"after"))
        assert put.ok and put.queue_offset == 5
    async with opened(tmp_path, plugin_host) as store:
        got = await store.get("Woken", 0, 0, 10)
        bodies = [decode_record(bytes(record)).body for record in got.records]
        assert bodies == [body("Woken", n) for n in range(5)] + [b"after"]
