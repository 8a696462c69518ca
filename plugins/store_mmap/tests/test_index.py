"""The index file on its own: what a reload after a kill -9 finds (the page cache kept
every byte written into the mapping, up to the instruction the process died at)."""

from __future__ import annotations

import pytest
from rocketmq_store_mmap.index import HEADER_SIZE, INT, IndexService

from rocketmq_core.errors import ConfigError
from rocketmq_core.store.api import DispatchRequest

TOPIC = "IndexTopic"
STAMP = 1_700_000_000_000


def request(phys: int, keys: str) -> DispatchRequest:
    return DispatchRequest(TOPIC, 0, phys, 100, 0, STAMP + phys, phys // 100, keys, None, 0, 0)


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
