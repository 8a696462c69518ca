"""The index file on its own: what a reload after a kill -9 finds (the page cache kept
every byte written into the mapping, up to the instruction the process died at)."""

from __future__ import annotations

import random

import pytest
from rocketmq_store_mmap import index as index_module
from rocketmq_store_mmap.index import HEADER_SIZE, INT, IndexService

from rocketmq_core.errors import ConfigError
from rocketmq_core.store.api import DispatchRequest

TOPIC = "IndexTopic"
STAMP = 1_700_000_000_000


def request(phys: int, keys: str, uniq_key: str | None = None) -> DispatchRequest:
    return DispatchRequest(TOPIC, 0, phys, 100, 0, STAMP + phys, phys // 100, keys, uniq_key, 0, 0)


def reopened(service: IndexService) -> IndexService:
    """The service a restarted process loads, without closing this one (as after a kill)."""
    again = IndexService(service.directory, service.slot_num, service.index_num)
    again.load()
    return again


def found(service: IndexService, key: str) -> list[int]:
    return service.query(TOPIC, key, 64, STAMP, STAMP + 10_000)


def test_a_record_whose_keys_were_half_indexed_is_indexed_again_after_reload(tmp_path):
    service = IndexService(tmp_path, 64, 1000)
    service.load()
    service.put(request(0, "a0 b0"))
    # the process dies between the first and second key of the record at 100
    service.put(request(100, "a1"))
    again = reopened(service)
    # recovery replays the records from the checkpoint; those fully indexed are skipped
    for record in (request(0, "a0 b0"), request(100, "a1 b1")):
        again.put(record)
    assert found(again, "b1") == [100]
    assert found(again, "a1") == [100]  # indexed twice, listed once
    assert found(again, "a0") == [0]
    assert found(again, "b0") == [0]


def test_the_header_has_no_copy_to_go_stale(tmp_path):
    # the compiled append writes the header in the file; the object must read that, and a
    # sync from a worker thread must not write an older header over a newer put's
    service = IndexService(tmp_path, 64, 1000)
    service.load()
    service.put(request(0, "k0"))
    newest = service.files[-1]
    assert newest.index_count == 2 and newest.end_phy_offset == 0
    INT.pack_into(newest.buffer, 36, 1)  # as if another writer rewound the count
    assert newest.index_count == 1
    INT.pack_into(newest.buffer, 36, 2)
    header = bytes(newest.buffer[:HEADER_SIZE])
    service.sync()
    assert bytes(newest.buffer[:HEADER_SIZE]) == header
    assert found(reopened(service), "k0") == [0]


def test_a_record_with_more_keys_than_a_file_holds_spans_files(tmp_path):
    service = IndexService(tmp_path / "index", 16, 3)  # entry 0 is reserved: 2 keys a file
    service.load()
    service.put(request(100, "a b c d e"))
    assert len(service.files) == 3
    assert all(found(service, key) == [100] for key in "abcde")


def test_an_index_file_must_hold_a_key(tmp_path):
    with pytest.raises(ConfigError, match="maxIndexNum is 1"):
        IndexService(tmp_path / "index", 16, 1)


def test_keys_of_one_record_in_one_slot_chain_through_each_other(tmp_path):
    service = IndexService(tmp_path / "index", 1, 100)  # one slot: every key shares it
    service.load()
    service.put(request(0, "old"))
    service.put(request(100, "a b c"))
    again = reopened(service)
    for index_service in (service, again):
        assert all(found(index_service, key) == [100] for key in "abc")
        assert found(index_service, "old") == [0]
    assert again.files[-1].slot_count == 1


def test_the_compiled_put_writes_what_the_python_put_writes(tmp_path, monkeypatch):
    """A replica's dispatch and recovery index through the compiled put when the keys fit
    where the newest file has disk blocks; byte for byte what the Python put writes, over
    keys that share slots, records with more keys than the compiled put holds on its
    stack, uniq keys alone, and records that fill files."""
    assert index_module.compiled_index_keys is not None, "the store's C extension is not built"
    rng = random.Random(31)
    tokens = [f"k{n}" for n in range(40)]
    records = []
    for number in range(400):
        keys = " ".join(rng.choice(tokens) for _ in range(rng.choice((0, 1, 2, 3, 20))))
        if rng.random() < 0.1:
            keys = f"  {keys}  {rng.choice(tokens)} "  # empty tokens are no keys
        uniq_key = f"U{number:05d}" if rng.random() < 0.7 else None
        records.append(request(number * 100, keys, uniq_key))

    def indexed(directory: str) -> list[bytes]:
        service = IndexService(tmp_path / directory, 8, 300)  # few slots, small files
        service.load()
        for record in records:
            service.put(record)
        return [bytes(file.buffer) for file in service.files]

    written = []  # what each compiled call wrote: entries, or -1 (left to the Python put)
    compiled = index_module.compiled_index_keys

    def counted(*args):
        written.append(compiled(*args))
        return written[-1]

    monkeypatch.setattr(index_module, "compiled_index_keys", counted)
    by_compiled = indexed("compiled")
    monkeypatch.setattr(index_module, "compiled_index_keys", None)
    by_python = indexed("python")
    assert len(by_python) > 3  # records filled files: the Python put started the next ones
    assert sum(1 for count in written if count > 0) > len(records) // 2
    assert by_compiled == by_python
