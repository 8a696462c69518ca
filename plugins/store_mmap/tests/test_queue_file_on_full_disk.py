"""A consume-queue file is sparse, and a write through its mapping to a page with no disk
block is a SIGBUS when the disk is full: the whole broker gone. Pages get their blocks
before they are written, so a full disk refuses the put instead.

The volume is the ``volume`` fixture's small tmpfs (conftest.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys

WRITER = """
import os, sys, anyio
from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

async def main():
    root = sys.argv[1]
    # the disk guard never refuses (a ratio above 100): the queue file meets the full disk
    store = create_store("mmap", StoreConfig(root_dir=root + "/store",
        commit_log_file_size=2 << 20, max_hash_slot_num=64, max_index_num=256,
        disk_space_warning_level_ratio=101))
    await store.open()
    assert store.append(MessageToStore("Full", 0, b"x")).ok  # the queue's first page
    filler = os.open(root + "/filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(filler, bytes(65536))
    except OSError:
        pass
    try:
        while True:
            os.write(filler, b"x")
    except OSError:
        pass
    # 300 entries cross into the queue file's second page, which has no block yet
    statuses = {store.append(MessageToStore("Full", 0, b"x")).status.name for _ in range(300)}
    print(" ".join(sorted(statuses)), flush=True)
    os.close(filler)
    os.unlink(root + "/filler")
    assert store.append(MessageToStore("Full", 0, b"x")).ok  # room again: taken again
    await store.close()

anyio.run(main)
"""


def test_a_put_on_a_full_disk_is_refused_not_a_sigbus(volume):
    writer = subprocess.run(
        [sys.executable, "-c", WRITER, str(volume)], capture_output=True, text=True, timeout=60
    )
    assert writer.returncode != -signal.SIGBUS, "a queue-file write on a full disk: SIGBUS"
    assert writer.returncode == 0, writer.stderr[-2000:]
    statuses = writer.stdout.split()
    assert "PUT_OK" in statuses  # the entries that fit the first page
    assert set(statuses) - {"PUT_OK"}, "a put that needed a new page was not refused"
