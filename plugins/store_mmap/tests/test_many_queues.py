"""Many queues are cheap: a consume-queue file holds no descriptor, idle ones are
unmapped (a budget of mappings), and a restart writes nothing it does not need: a clean
stop and start leaves the sparse queue files as sparse as they were."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rocketmq_core.store.api import GetStatus, MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

pytestmark = pytest.mark.anyio

QUEUE_FILE_SIZE = 6_000_000  # RocketMQ's: 300,000 entries, sparse until written


def config(directory: Path, **overrides) -> StoreConfig:
    options = dict(
        root_dir=str(directory),
        commit_log_file_size=4 << 20,
        consume_queue_file_size=QUEUE_FILE_SIZE,
        max_hash_slot_num=1024,
        max_index_num=4096,
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


def message(topic: str, number: int) -> MessageToStore:
    return MessageToStore(topic, 0, b"body-%d" % number)


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def queue_file_maps(root: Path) -> int:
    """This process's mappings of consume-queue files under ``root``."""
    marker = str(root / "consumequeue")
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if marker in line)


def disk_use(root: Path) -> dict[str, int]:
    """Allocated bytes (st_blocks) of each file under ``root`` but the lock."""
    return {
        str(path.relative_to(root)): path.stat().st_blocks * 512
        for path in root.rglob("*")
        if path.is_file() and path.name not in ("lock", "checkpoint", "abort")
    }


async def fill(root: Path, plugin_host, topics: int, each: int, **overrides) -> None:
    async with opened(root, plugin_host, **overrides) as store:
        for number in range(each):
            for topic in range(topics):
                assert (await store.put(message(f"T{topic:04d}", number))).ok


async def test_a_queue_file_holds_no_descriptor(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host) as store:
        assert (await store.put(message("First", 0))).ok
        before = descriptors()
        for topic in range(300):
            assert (await store.put(message(f"T{topic:04d}", 0))).ok
        assert descriptors() - before <= 2  # was one per queue file
        found = await store.get("T0123", 0, 0, 8)
        assert found.status is GetStatus.FOUND and b"body-0" in found.records[0]


async def test_idle_queue_files_are_unmapped_beyond_the_budget(tmp_path, plugin_host):
    budget = dict(max_mapped_consume_queue_files=16)
    async with opened(tmp_path, plugin_host, **budget) as store:
        for number in range(3):
            for topic in range(100):
                assert (await store.put(message(f"T{topic:04d}", number))).ok
            # reads of every queue map files again, and let idle ones go
            for topic in range(100):
                found = await store.get(f"T{topic:04d}", 0, 0, 8)
                assert len(found.records) == number + 1
                assert all(b"body-%d" % n in found.records[n] for n in range(number + 1))
        assert queue_file_maps(tmp_path) <= 16 + 2  # an operation may map two before a trim
        assert store.stats()["mapped_queue_files"] <= 16 + 2
        assert store.mappings.unmapped > 0
    async with opened(tmp_path, plugin_host, **budget) as store:
        assert queue_file_maps(tmp_path) == 0  # a start maps no queue file
        for topic in range(100):
            assert store.max_offset(f"T{topic:04d}", 0) == 3


async def test_a_clean_restart_writes_nothing_and_keeps_files_sparse(tmp_path, plugin_host):
    await fill(tmp_path, plugin_host, topics=200, each=3)
    after_fill = disk_use(tmp_path)
    queue_files = [name for name in after_fill if name.startswith("consumequeue")]
    assert len(queue_files) == 200
    # 3 entries each: one block, not 6 MB (a zero-filled file takes all its 6 MB)
    assert max(after_fill[name] for name in queue_files) <= 64 * 1024
    for _restart in range(2):
        async with opened(tmp_path, plugin_host) as store:
            assert store.max_offset("T0199", 0) == 3
        assert disk_use(tmp_path) == after_fill


CRASHING_WRITER = """
import os, sys, anyio
from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

async def main():
    store = create_store("mmap", StoreConfig(root_dir=sys.argv[1],
        commit_log_file_size=4 << 20, max_hash_slot_num=1024, max_index_num=4096))
    await store.open()
    for topic in range(50):
        for number in range(3):
            assert (await store.put(MessageToStore(f"T{topic:04d}", 0, b"x"))).ok
    await store.flush()
    print("ready", flush=True)
    await anyio.sleep(60)

anyio.run(main)
"""


async def test_a_restart_after_a_crash_keeps_queue_files_sparse(tmp_path, plugin_host):
    writer = subprocess.Popen(
        [sys.executable, "-c", CRASHING_WRITER, str(tmp_path)], stdout=subprocess.PIPE
    )
    try:
        assert writer.stdout.readline().strip() == b"ready"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert (tmp_path / "abort").exists()
    before = disk_use(tmp_path)
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["recovered_after_crash"] is True
        assert store.max_offset("T0049", 0) == 3
    after = disk_use(tmp_path)
    queue_files = [name for name in before if name.startswith("consumequeue")]
    assert len(queue_files) == 50
    assert {name: after[name] for name in queue_files} == {
        name: before[name] for name in queue_files
    }


def keyed(number: int) -> MessageToStore:
    return MessageToStore("Keyed", 0, b"body-%d" % number, b"KEYS\x01key-%d" % number)


def open_paths() -> list[str]:
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
    return paths


async def test_an_index_file_holds_no_descriptor(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host, max_index_num=64) as store:
        for number in range(200):  # 64 entries a file: four index files
            assert (await store.put(keyed(number))).ok
        assert len(list((tmp_path / "index").iterdir())) >= 4
        index_directory = str(tmp_path / "index")
        assert not [path for path in open_paths() if path.startswith(index_directory)]
        assert (await store.query_by_key("Keyed", "key-7", 8, 0, 1 << 62)).records


async def test_an_index_file_gets_disk_blocks_only_ahead_of_its_writer(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host, max_index_num=1_000_000) as store:
        for number in range(100):
            assert (await store.put(keyed(number))).ok
        (index_file,) = (tmp_path / "index").iterdir()
        assert index_file.stat().st_size > 20_000_000
        # header and slots (4 KiB) and 64 KiB of entries, not the 20 MB file
        assert index_file.stat().st_blocks * 512 <= 128 << 10
