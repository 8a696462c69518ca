"""An index file is sparse, and a write through its mapping to a page with no disk block
is a SIGBUS when the disk is full: the whole broker gone. Its header and slots get
their blocks when the file is made, its entries ahead of the writer, so a full disk
refuses the put of a message with keys instead, and puts go on once space is freed.

The volume is the ``volume`` fixture's small tmpfs (conftest.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

WRITER = """
import os, sys, anyio
from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

root, index_num, queues, puts, sys_flag = sys.argv[1], *map(int, sys.argv[2:])

def keyed(number):
    keys = f"order-{number} customer-{number % 7}".encode()
    return MessageToStore("Full", number % queues, b"x", b"KEYS\\x01" + keys, sys_flag=sys_flag)

async def main():
    # the disk guard never refuses (a ratio above 100): the index file meets the full disk
    store = create_store("mmap", StoreConfig(root_dir=root + "/store",
        commit_log_file_size=2 << 20, max_hash_slot_num=64, max_index_num=index_num,
        disk_space_warning_level_ratio=101))
    await store.open()
    for number in range(queues):  # each queue's first page, and the index file
        assert store.append(keyed(number)).ok
    filler = os.open(root + "/filler", os.O_WRONLY | os.O_CREAT)
    for chunk in (65536, 1):
        try:
            while True:
                os.write(filler, bytes(chunk))
        except OSError:
            pass
    statuses = []
    for number in range(queues, puts):
        result = store.append(keyed(number))
        statuses.append(result.status.name)
        if not result.ok:
            print(result.remark, file=sys.stderr)
            break
    print(" ".join(sorted(set(statuses))), flush=True)
    os.close(filler)
    os.unlink(root + "/filler")
    for number in range(puts, puts + 3):  # room again: taken again
        assert store.append(keyed(number)).ok
    assert (await store.query_by_key("Full", f"order-{puts}", 10, 0, 1 << 62)).records
    await store.close()

anyio.run(main)
"""

CASES = {
    # entries past the part allocated ahead (64 KiB, ~3,460 keys: 20 queues' first pages
    # hold their consume-queue entries meanwhile); through the compiled append
    "entries past the allocated part": (8192, 20, 4000, 0),
    # a new index file on the full disk (64 entries a file)
    "a new index file": (64, 1, 100, 0),
    # prepared transaction records: indexed, in no queue (the Python path)
    "a prepared record's keys": (64, 1, 100, 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_keys_on_a_full_disk_are_refused_not_a_sigbus(volume, case):
    writer = subprocess.run(
        [sys.executable, "-c", WRITER, str(volume), *map(str, CASES[case])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert writer.returncode != -signal.SIGBUS, "an index write on a full disk: SIGBUS"
    assert writer.returncode == 0, writer.stderr[-2000:]
    statuses = writer.stdout.split()
    # the keys that fit what was allocated, then a clean refusal
    assert statuses == ["CREATE_MAPPED_FILE_FAILED", "PUT_OK"]
    assert "free disk space under" in writer.stderr
