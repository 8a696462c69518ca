"""A record's DispatchRequest read in place (record_requests.py) equals the one built from
the whole decoded record, and the compiled reader equals the Python one: for V1 and V2
records, IPv4 and IPv6 hosts, odd properties, and bytes that are not a valid record
(torn, garbled, a wrong body CRC), which all three refuse alike."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_store_mmap import record_requests
from rocketmq_store_mmap.record_requests import read_python, read_request
from rocketmq_store_mmap.recovery import dispatch_request
from test_replication import assert_keys_found, assert_replica, fill_master, opened, replicate

from rocketmq_core.protocol.message import (
    TRANSACTION_PREPARED,
    RecordError,
    body_crc,
    decode_record,
    pack_host,
    record_size,
    tags_code_of,
    with_host_flags,
    write_record,
)
from rocketmq_core.store.api import DispatchRequest
from tests.missing import missing

V4_HOST = pack_host("10.1.2.3", 5000)
V6_HOST = pack_host("fe80::1", 5000)


def compiled(buffer, position: int, check_crc: bool) -> DispatchRequest | None:
    reader = record_requests.compiled_reader
    if reader is None:
        missing("rocketmq_store_mmap._append is not built: reinstall the plugin with a C compiler")
    return reader(buffer, position, check_crc, DispatchRequest, tags_code_of)


def record(
    topic: bytes = b"Orders",
    properties: bytes = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u-1\x02",
    body: bytes = b"hello" * 50,
    born_host: bytes = V4_HOST,
    store_host: bytes = V4_HOST,
    sys_flag: int = 0,
    physical: int = 4096,
) -> bytearray:
    flags = with_host_flags(sys_flag, born_host, store_host)
    size = record_size(len(body), len(topic), len(properties), len(born_host) == 20,
                       len(store_host) == 20)  # fmt: skip
    buffer = bytearray(size)
    write_record(buffer, 0, size, body, body_crc(body), topic, properties, 3, 7, 42,
                 physical, flags, 1_700_000_000_000, born_host, 1_700_000_000_123,
                 store_host, 2, 99)  # fmt: skip
    return buffer


def reference(buffer, position: int, check_crc: bool) -> DispatchRequest | None:
    """What recovery built before: the whole record decoded, then the request."""
    try:
        return dispatch_request(decode_record(buffer, position, check_crc=check_crc), ())
    except RecordError:
        return None


def python(buffer, position: int, check_crc: bool) -> DispatchRequest | None:
    try:
        return read_python(buffer, position, check_crc)
    except RecordError:
        return None


def assert_alike(buffer, position: int = 0) -> DispatchRequest | None:
    for check_crc in (False, True):
        expected = reference(buffer, position, check_crc)
        assert python(buffer, position, check_crc) == expected
        assert compiled(buffer, position, check_crc) == expected
        if expected is not None:
            assert read_request(buffer, position, check_crc) == expected
        else:
            with pytest.raises(RecordError):
                read_request(buffer, position, check_crc)
    return reference(buffer, position, False)


def test_the_usual_record_gives_every_field():
    assert assert_alike(record()) == DispatchRequest(
        "Orders", 3, 4096, len(record()), tags_code_of(b"TagA"), 1_700_000_000_123, 42,
        "k1 k2", "u-1", 0, 99,
    )  # fmt: skip


@pytest.mark.parametrize("topic", [b"T" * 127, b"T" * 128, b"T" * 255, "Ünïcode".encode(), b""])
@pytest.mark.parametrize("hosts", [(V4_HOST, V4_HOST), (V6_HOST, V4_HOST), (V6_HOST, V6_HOST)])
def test_v1_and_v2_records_with_either_host_kind(topic, hosts):
    buffer = record(topic, born_host=hosts[0], store_host=hosts[1], sys_flag=TRANSACTION_PREPARED)
    request = assert_alike(buffer)
    assert request is not None and request.topic == topic.decode()
    assert request.sys_flag & TRANSACTION_PREPARED


@pytest.mark.parametrize(
    "properties",
    [
        b"",
        b"TAGS\x01",  # an empty value: no tags
        b"TAGS\x01a\x02TAGS\x01\x02",  # the last non-empty value wins
        b"TAGS\x01a\x02TAGS\x01b",
        b"\x01TAGS\x02TAGS",  # an empty name, a name without a value
        b"KEYS\x01k\x01more\x02",  # a value holds 0x01 after the first
        b"XTAGS\x01no\x02TAGSX\x01no\x02a\x01TAGS\x01no",
        "TAGS\x01标签\x02KEYS\x01ключ\x02UNIQ_KEY\x01ü".encode(),
        b"\x02\x02\x02",
        b"WAIT\x01true\x02DELAY\x013\x02REAL_TOPIC\x01Later",
        b"TAGS\x01ok\x02junk\x01\xff\xfe",  # not UTF-8 anywhere: not a record
        b"TAGS\x01\xe4\xb8",  # a cut character
        b"TAGS\x01\xed\xa0\x80",  # a surrogate, which Python's UTF-8 refuses
    ],
)
def test_properties_are_read_by_parse_properties_rules(properties):
    assert_alike(record(properties=properties))


def test_a_topic_that_is_not_utf8_is_not_a_record():
    assert assert_alike(record(topic=b"Or\xffders")) is None


def test_a_wrong_body_crc_is_refused_only_when_checked():
    buffer = record()
    buffer[-200] ^= 0x01  # a byte of the body
    assert compiled(buffer, 0, False) is not None
    assert compiled(buffer, 0, True) is None
    assert_alike(buffer)


def test_a_record_inside_a_larger_buffer_and_a_memoryview():
    first, second = record(physical=0), record(topic=b"T" * 200, born_host=V6_HOST)
    data = bytes(first + second + bytes(8))
    assert assert_alike(memoryview(data), len(first)).topic == "T" * 200
    assert assert_alike(data, 3) is None
    assert assert_alike(data, len(data) - 8) is None  # zeros: the end of the log


@pytest.mark.parametrize("at", [88, -2], ids=["V2 topic length", "properties length"])
def test_negative_lengths_are_not_a_record(at):
    """decode_record used to let a negative one through when the rest added up."""
    buffer = record(topic=b"T" * 200, properties=b"", body=b"")
    struct.pack_into(">h", buffer, at if at >= 0 else len(buffer) + at, -1)
    assert assert_alike(buffer) is None


def test_tags_code_rules_see_the_whole_message():
    seen = []

    def delivery_time(message):
        seen.append(message.body)
        return int(message.properties["DUE"]) if "DUE" in message.properties else None

    due = record(properties=b"TAGS\x01later\x02DUE\x0112345")
    assert read_request(due, 0, False, [delivery_time]).tags_code == 12345
    assert read_request(record(), 0, False, [delivery_time]).tags_code == tags_code_of(b"TagA")
    assert seen == [b"hello" * 50] * 2


# --- any record, and any damage to it -------------------------------------------------------

NAMES = st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"WAIT", b"", "标签".encode()])
VALUES = st.sampled_from(
    [b"", b"TagA", "标签".encode(), b"k1 k2", b" k1  k2 ", b"\x01", b"x" * 40, b"\xff"]
)


@st.composite
def records(draw) -> bytearray:
    pairs = draw(st.lists(st.tuples(NAMES, VALUES, st.booleans()), max_size=6))
    properties = b"\x02".join(name + (b"\x01" if split else b"") + value
                              for name, value, split in pairs)  # fmt: skip
    if draw(st.booleans()):
        properties += b"\x02"
    return record(
        topic=draw(st.sampled_from([b"Orders", b"T" * 127, b"T" * 130, "Tö".encode()])),
        properties=properties,
        body=draw(st.binary(max_size=300)),
        born_host=draw(st.sampled_from([V4_HOST, V6_HOST])),
        store_host=draw(st.sampled_from([V4_HOST, V6_HOST])),
    )


@settings(max_examples=400, deadline=None)
@given(
    buffer=records(),
    damage=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 40),
    padding=st.integers(0, 16),
)
def test_any_record_damaged_anyhow_reads_alike(buffer, damage, cut, padding):
    for at, value in damage:
        buffer[at % len(buffer)] = value
    data = bytes(buffer[: len(buffer) - cut]) + bytes(padding)
    assert_alike(data)


@settings(max_examples=200, deadline=None)
@given(buffer=records(), at=st.sampled_from([0, 2, 36, 84, 86]), value=st.integers(0, 2**16 - 1))
def test_lengths_rewritten_read_alike(buffer, at, value):
    """The fields that place the others (size, sysFlag's host bits, the body length)
    rewritten to any value."""
    struct.pack_into(">H", buffer, min(at, len(buffer) - 2), value)
    assert_alike(bytes(buffer) + bytes(64))


# --- a slave and a recovery on the Python reader alone ----------------------------------------


@pytest.mark.anyio
async def test_a_slave_and_its_restart_on_the_python_reader_equal_the_master(tmp_path, monkeypatch):
    """What a store does where the compiled reader is not built (no C compiler)."""
    monkeypatch.setattr(record_requests, "compiled_reader", None)
    master = await opened(tmp_path / "master")
    try:
        await fill_master(master, rounds=2)
        slave = await opened(tmp_path / "slave")
        try:
            replicate(master, slave, 0)
            await assert_replica(master, slave)
        finally:
            await slave.close()
        (tmp_path / "slave" / "abort").touch()  # as after a kill: every record replayed
        slave = await opened(tmp_path / "slave")
        try:
            assert slave.stats()["recovered_after_crash"] is True
            await assert_replica(master, slave)
            await assert_keys_found(master, slave)
        finally:
            await slave.close()
    finally:
        await master.close()
