"""The stored-message record, properties, hashes, ids and batch bodies (MESSAGE.md §1-6)."""

from __future__ import annotations

import struct
import zlib

import pytest

from rocketmq_core.protocol.message import (
    BLANK_MAGIC,
    BORNHOST_V6,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6,
    BatchItem,
    RecordError,
    body_crc,
    decode_offset_msg_id,
    decode_record,
    encode_batch,
    encode_properties,
    host_is_v6,
    iter_batch,
    iter_records,
    java_string_hash,
    offset_msg_id,
    pack_host,
    parse_properties,
    peek_record,
    property_value,
    record_size,
    tags_code,
    unpack_host,
    write_blank,
)
from rocketmq_core.testing.records import record_bytes

# --- the worked example of MESSAGE.md §1.1 -----------------------------------------------------

EXAMPLE_PROPERTIES = {
    "UNIQ_KEY": "7F00000130390123ABCD0000075BCD15",
    "TAGS": "TagA",
    "WAIT": "true",
    "CLUSTER": "DefaultCluster",
}
EXAMPLE_HEX = (
    "000000BE DAA320A7 77D18982 00000000 00000000 0000000000000000 0000000000000000"
    " 00000000 0000018BCFE56800 7F000001 0000D431 0000018BCFE56805 C0A80001 00002A9F"
    " 00000000 0000000000000000 00000005 48656C6C6F 09 546F70696354657374"
    " 0055 554E49515F4B455901 37463030303030313330333930313233"
    " 41424344303030303037354243443135 02 5441475301 54616741 02 5741495401 74727565 02"
    " 434C555354455201 44656661756C74436C7573746572 02"
)
EXAMPLE_BYTES = bytes.fromhex(EXAMPLE_HEX)
STORE_HOST = pack_host("192.168.0.1", 10911)


def build(
    *,
    body: bytes = b"Hello",
    topic: bytes = b"TopicTest",
    properties: bytes | None = None,
    born_host: bytes | None = None,
    store_host: bytes = STORE_HOST,
    sys_flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    reconsume_times: int = 0,
    flag: int = 0,
) -> bytes:
    """A record as write_record packs it (the example's values unless told otherwise)."""
    if properties is None:
        properties = encode_properties(EXAMPLE_PROPERTIES).encode()
    if born_host is None:
        born_host = pack_host("127.0.0.1", 54321)
    return record_bytes(
        body=body,
        topic=topic,
        properties=properties,
        born_host=born_host,
        store_host=store_host,
        sys_flag=sys_flag,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        reconsume_times=reconsume_times,
    )


def test_worked_example_is_byte_exact():
    assert len(EXAMPLE_BYTES) == 190
    assert len(encode_properties(EXAMPLE_PROPERTIES).encode()) == 85
    assert record_size(5, 9, 85, False, False) == 190
    assert build() == EXAMPLE_BYTES


def test_worked_example_body_crc_is_masked_crc32():
    assert zlib.crc32(b"Hello") == 0xF7D18982
    assert body_crc(b"Hello") == 0x77D18982


def test_worked_example_offset_message_id():
    assert offset_msg_id(STORE_HOST, 0) == "C0A8000100002A9F0000000000000000"


def test_worked_example_decodes_to_its_fields():
    message = decode_record(EXAMPLE_BYTES, check_crc=True)
    assert message.size == 190
    assert message.magic == MAGIC_V1
    assert message.body_crc == 0x77D18982
    assert (message.queue_id, message.flag, message.queue_offset) == (0, 0, 0)
    assert (message.commit_log_offset, message.sys_flag) == (0, 0)
    assert message.born_timestamp == 1700000000000
    assert unpack_host(message.born_host) == ("127.0.0.1", 54321)
    assert message.store_timestamp == 1700000000005
    assert unpack_host(message.store_host) == ("192.168.0.1", 10911)
    assert (message.reconsume_times, message.prepared_transaction_offset) == (0, 0)
    assert (message.body, message.topic) == (b"Hello", "TopicTest")
    assert message.properties == EXAMPLE_PROPERTIES
    assert message.offset_msg_id == "C0A8000100002A9F0000000000000000"
    assert message.msg_id == "7F00000130390123ABCD0000075BCD15"
    assert message.tags == "TagA"


def test_message_id_falls_back_to_the_offset_id_and_keys_split_on_spaces():
    record = build(properties=encode_properties({"KEYS": "k1  k2 "}).encode(), physical_offset=7)
    message = decode_record(record)
    assert message.msg_id == offset_msg_id(STORE_HOST, 7)
    assert message.keys == ["k1", "k2"]
    assert message.tags is None


# --- V2 records and IPv6 hosts -----------------------------------------------------------------


def test_topic_of_127_bytes_is_still_v1():
    record = build(topic=b"T" * 127)
    assert struct.unpack_from(">i", record, 4)[0] == MAGIC_V1
    assert len(record) == 190 - 9 + 127
    assert decode_record(record).topic == "T" * 127


def test_topic_over_127_bytes_is_written_as_v2_with_a_two_byte_length():
    topic = b"%RETRY%" + b"g" * 193  # 200 bytes
    record = build(topic=topic)
    assert struct.unpack_from(">i", record, 4)[0] == MAGIC_V2
    assert len(record) == 190 - 9 + 200 + 1
    topic_at = 84 + 4 + 5  # body length field, then the 5-byte body
    assert struct.unpack_from(">h", record, topic_at)[0] == 200
    assert record[topic_at + 2 : topic_at + 202] == topic
    message = decode_record(record, check_crc=True)
    assert (message.magic, message.topic, message.body) == (MAGIC_V2, topic.decode(), b"Hello")
    assert message.properties == EXAMPLE_PROPERTIES


def test_ipv6_born_host_shifts_the_later_fields_by_12():
    born = pack_host("fe80::1", 1234)
    record = build(born_host=born, sys_flag=BORNHOST_V6)
    assert len(record) == 190 + 12
    assert record[48:68] == born
    assert struct.unpack_from(">q", record, 68)[0] == 1700000000005  # store time: 56 + 12
    assert record[76:84] == STORE_HOST
    message = decode_record(record, check_crc=True)
    assert message.sys_flag == BORNHOST_V6
    assert unpack_host(message.born_host) == ("fe80::1", 1234)
    assert message.store_host == STORE_HOST


def test_ipv6_both_hosts_shift_by_24_and_give_56_digit_ids():
    born, store = pack_host("fe80::1", 1234), pack_host("2001:db8::7", 10911)
    record = build(
        born_host=born, store_host=store, sys_flag=BORNHOST_V6 | STOREHOST_V6, reconsume_times=3
    )
    assert len(record) == 190 + 24
    assert record[76:96] == store
    assert struct.unpack_from(">i", record, 96)[0] == 3  # reconsume times: 72 + 24
    message = decode_record(record, check_crc=True)
    assert message.sys_flag == BORNHOST_V6 | STOREHOST_V6
    assert unpack_host(message.store_host) == ("2001:db8::7", 10911)
    assert message.reconsume_times == 3
    assert len(message.offset_msg_id) == 56
    assert message.offset_msg_id == store.hex().upper() + "0" * 16


def test_pack_host_packs_address_and_port():
    assert pack_host("192.168.0.1", 10911) == bytes.fromhex("C0A8000100002A9F")
    assert not host_is_v6(pack_host("10.0.0.1", 1))
    packed = pack_host("::1", 9876)
    assert len(packed) == 20 and host_is_v6(packed)
    assert unpack_host(packed) == ("::1", 9876)


# --- decode errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [0, 7, 30, 189])
def test_truncated_record_is_a_record_error(keep):
    with pytest.raises(RecordError):
        decode_record(EXAMPLE_BYTES[:keep])


def test_bad_magic_is_a_record_error():
    record = bytearray(EXAMPLE_BYTES)
    record[4:8] = b"\x00\x00\x00\x00"
    with pytest.raises(RecordError, match="bad magic code 0x0 at 0"):
        decode_record(bytes(record))


def test_blank_filler_is_not_a_record():
    buffer = bytearray(104)
    write_blank(buffer, 4, 100)
    assert peek_record(bytes(buffer), 4) == (100, BLANK_MAGIC)
    with pytest.raises(RecordError, match="bad magic code 0xcbd43194 at 4"):
        decode_record(bytes(buffer), 4)


def test_peek_past_the_end_is_a_record_error():
    assert peek_record(EXAMPLE_BYTES, 0) == (190, MAGIC_V1)
    with pytest.raises(RecordError, match="the buffer ends"):
        peek_record(EXAMPLE_BYTES, 185)


def test_bad_body_crc_is_found_only_when_checked():
    record = bytearray(EXAMPLE_BYTES)
    body_at = 84 + 4
    assert record[body_at : body_at + 5] == b"Hello"
    record[body_at] = ord("J")
    assert decode_record(bytes(record)).body == b"Jello"
    with pytest.raises(RecordError, match="the body CRC does not match"):
        decode_record(bytes(record), check_crc=True)


def test_size_field_larger_than_the_buffer_is_a_record_error():
    record = bytearray(EXAMPLE_BYTES)
    struct.pack_into(">i", record, 0, 191)
    with pytest.raises(RecordError, match="claims 191 bytes; 190 left"):
        decode_record(bytes(record))


def test_size_field_that_disagrees_with_the_fields_is_a_record_error():
    record = bytearray(EXAMPLE_BYTES + b"\x00")
    struct.pack_into(">i", record, 0, 191)
    with pytest.raises(RecordError, match="do not add up to 191 bytes"):
        decode_record(bytes(record))


def test_body_length_overrunning_the_record_is_a_record_error():
    record = bytearray(EXAMPLE_BYTES)
    struct.pack_into(">i", record, 84, 100_000)
    with pytest.raises(RecordError):
        decode_record(bytes(record))


def test_decode_at_a_position_and_iterate_back_to_back_records():
    second = build(body=b"World!", physical_offset=190, queue_offset=1)
    data = EXAMPLE_BYTES + second
    assert decode_record(data, 190).body == b"World!"
    assert [(m.body, m.queue_offset) for m in iter_records(data)] == [
        (b"Hello", 0),
        (b"World!", 1),
    ]
    assert [m.body for m in iter_records(memoryview(data))] == [b"Hello", b"World!"]
    assert list(iter_records(b"")) == []


def test_iterating_a_body_with_a_torn_last_record_fails():
    records = iter_records(EXAMPLE_BYTES + EXAMPLE_BYTES[:100])
    assert next(records).body == b"Hello"
    with pytest.raises(RecordError):
        next(records)


# --- properties ------------------------------------------------------------------------------


def test_encode_properties_writes_every_pair_with_a_trailing_separator():
    assert encode_properties({"A": "1", "BB": "two"}) == "A\x011\x02BB\x01two\x02"
    assert encode_properties({}) == ""


def test_encode_properties_drops_empty_keys_and_values():
    assert encode_properties({"": "x", "EMPTY": "", "K": "v"}) == "K\x01v\x02"


def test_parse_properties_round_trips():
    properties = {"UNIQ_KEY": "ABC", "TAGS": "TagA", "KEYS": "k1 k2", "ÜNI": "cødé"}
    assert parse_properties(encode_properties(properties)) == properties


@pytest.mark.parametrize(
    "text, parsed",
    [
        pytest.param("a\x01b\x02", {"a": "b"}, id="one-pair"),
        pytest.param("a\x01b", {"a": "b"}, id="no-trailing-separator"),
        pytest.param("\x01b\x02c\x01d\x02", {"c": "d"}, id="empty-key-dropped"),
        pytest.param("a\x01\x02c\x01d\x02", {"c": "d"}, id="empty-value-dropped"),
        pytest.param("ab\x02c\x01d\x02", {"c": "d"}, id="no-name-value-separator-dropped"),
        pytest.param("a\x01b\x01c\x02", {"a": "b\x01c"}, id="value-keeps-later-0x01"),
        pytest.param("a\x01\x01\x02", {"a": "\x01"}, id="value-of-one-0x01"),
        pytest.param("\x02\x02a\x01b\x02\x02", {"a": "b"}, id="empty-segments-skipped"),
        pytest.param("a\x011\x02a\x012\x02", {"a": "2"}, id="later-duplicate-wins"),
        pytest.param("", {}, id="empty"),
    ],
)
def test_parse_properties_follows_java(text, parsed):
    assert parse_properties(text) == parsed


def test_property_value_finds_a_key_anywhere():
    properties = encode_properties({"UNIQ_KEY": "U1", "TAGS": "TagA", "KEYS": "k"}).encode()
    assert property_value(properties, b"UNIQ_KEY") == b"U1"
    assert property_value(properties, b"TAGS") == b"TagA"
    assert property_value(properties, b"KEYS") == b"k"
    assert property_value(properties, b"WAIT") is None
    assert property_value(b"", b"TAGS") is None


def test_property_value_reads_a_last_pair_without_separator():
    assert property_value(b"A\x011\x02TAGS\x01x", b"TAGS") == b"x"


def test_property_value_ignores_a_key_that_ends_another_key():
    properties = encode_properties({"MYTAGS": "fake", "TAGS": "real"}).encode()
    assert property_value(properties, b"TAGS") == b"real"


def test_property_value_ignores_the_key_inside_another_value():
    properties = encode_properties({"X": "TAGS\x01fake", "TAGS": "real"}).encode()
    assert property_value(properties, b"TAGS") == b"real"
    only_inside = encode_properties({"X": "TAGS\x01fake"}).encode()
    assert property_value(only_inside, b"TAGS") is None


# --- java String.hashCode and tags codes --------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("TagA", 2598919, id="TagA"),
        pytest.param("", 0, id="empty"),
        pytest.param("a", 97, id="a"),
        pytest.param("hello", 99162322, id="hello"),
        pytest.param("Aa", 2112, id="Aa"),
        pytest.param("BB", 2112, id="BB-collides-with-Aa"),
        pytest.param("polygenelubricants", -2147483648, id="int32-min"),
        pytest.param("é", 233, id="latin-1"),
        pytest.param("中文", 646394, id="cjk"),
        pytest.param("\U0001f600", 1772899, id="surrogate-pair"),
        pytest.param("tag\U0001f600x", -826375781, id="wraps-negative"),
    ],
)
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_tags_code_is_the_hash_or_zero():
    assert tags_code("TagA") == 2598919
    assert tags_code("TagA") == 2598919  # the cached answer is the same
    assert tags_code("") == 0
    assert tags_code(None) == 0
    assert tags_code("polygenelubricants") == -(2**31)


# --- offset message ids ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host, offset",
    [
        pytest.param(pack_host("192.168.0.1", 10911), 0, id="ipv4-zero"),
        pytest.param(pack_host("10.1.2.3", 65535), 2**40 + 17, id="ipv4-large"),
        pytest.param(pack_host("2001:db8::1", 10911), 123456789, id="ipv6"),
    ],
)
def test_offset_msg_id_round_trips(host, offset):
    msg_id = offset_msg_id(host, offset)
    assert len(msg_id) == (56 if host_is_v6(host) else 32)
    assert msg_id == msg_id.upper()
    assert decode_offset_msg_id(msg_id) == (host, offset)
    assert decode_offset_msg_id(msg_id.lower()) == (host, offset)


@pytest.mark.parametrize(
    "msg_id, error",
    [
        pytest.param("ZZ" * 16, "is not hexadecimal", id="not-hex"),
        pytest.param("A" * 31, "is not hexadecimal", id="odd-length"),
        pytest.param("A" * 30, "neither 32 nor 56 hex digits", id="short"),
        pytest.param("A" * 34, "neither 32 nor 56 hex digits", id="between"),
        pytest.param("", "neither 32 nor 56 hex digits", id="empty"),
    ],
)
def test_bad_offset_msg_id_is_a_value_error(msg_id, error):
    with pytest.raises(ValueError, match=error):
        decode_offset_msg_id(msg_id)


# --- batch bodies ------------------------------------------------------------------------------

BATCH = [
    BatchItem(0, b"first", encode_properties({"UNIQ_KEY": "U1", "TAGS": "A"}).encode()),
    BatchItem(7, b"", b""),
    BatchItem(1, b"\x00" * 300, encode_properties({"KEYS": "k1 k2"}).encode()),
]


def test_batch_round_trips():
    assert list(iter_batch(encode_batch(BATCH))) == BATCH
    assert list(iter_batch(b"")) == []


def test_batch_record_layout():
    data = encode_batch(BATCH[:1])
    properties = BATCH[0].properties
    assert struct.unpack_from(">iiiii", data) == (20 + 5 + 2 + len(properties), 0, 0, 0, 5)
    assert data[20:25] == b"first"
    assert struct.unpack_from(">h", data, 25)[0] == len(properties)
    assert data[27:] == properties


def test_batch_with_a_cut_header_is_a_record_error():
    data = encode_batch(BATCH)
    first_size = struct.unpack_from(">i", data)[0]
    with pytest.raises(RecordError, match=f"batch record at {first_size} is cut short"):
        list(iter_batch(data[: first_size + 10]))


def test_batch_body_overrunning_is_a_record_error():
    data = bytearray(encode_batch(BATCH[:1]))
    struct.pack_into(">i", data, 16, 1000)
    with pytest.raises(RecordError, match="body length 1000 overruns"):
        list(iter_batch(bytes(data)))


def test_batch_negative_body_length_is_a_record_error():
    data = bytearray(encode_batch(BATCH[:1]))
    struct.pack_into(">i", data, 16, -1)
    with pytest.raises(RecordError, match="body length -1 overruns"):
        list(iter_batch(bytes(data)))


def test_batch_properties_overrunning_is_a_record_error():
    data = encode_batch(BATCH[:1])
    with pytest.raises(RecordError, match="properties overrun the body"):
        list(iter_batch(data[:-1]))


def test_batch_wrong_total_size_is_a_record_error():
    data = bytearray(encode_batch(BATCH[:1]))
    struct.pack_into(">i", data, 0, 999)
    with pytest.raises(RecordError, match="total size 999 is wrong"):
        list(iter_batch(bytes(data)))
