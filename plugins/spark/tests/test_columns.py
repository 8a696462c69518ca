"""decode_pull_body against the reference decoder: every column of every record must be what
``iter_records`` and ``StoredMessage`` say, and a garbled body must raise RecordError."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_spark.columns import decode_pull_body
from rocketmq_spark.schema import arrow_schema

from rocketmq_core.protocol.compression import CompressionType, compress, decompress
from rocketmq_core.protocol.message import (
    BORNHOST_V6,
    COMPRESSED,
    MAGIC_V2,
    STOREHOST_V6,
    RecordError,
    encode_properties,
    iter_records,
    pack_host,
)
from rocketmq_core.testing.records import record_bytes

TOPIC = "TopicTest"
BROKER = "broker-a"
STORE_V4 = pack_host("192.168.0.1", 10911)
STORE_V6 = pack_host("2001:db8::1", 10911)
BORN_V4 = pack_host("127.0.0.1", 54321)
BORN_V6 = pack_host("fe80::2", 40000)


def record(
    *,
    body: bytes = b"Hello",
    properties: bytes | dict[str, str] | None = None,
    topic: bytes = TOPIC.encode(),
    born_host: bytes = BORN_V4,
    store_host: bytes = STORE_V4,
    sys_flag: int = 0,
    queue_id: int = 3,
    queue_offset: int = 0,
    physical_offset: int = 0,
    born_timestamp: int = 1700000000000,
    store_timestamp: int = 1700000000005,
    reconsume_times: int = 0,
) -> bytes:
    """One stored record as the broker's own writer packs it."""
    if properties is None:
        properties = {"UNIQ_KEY": "7F00000130390123ABCD0000075BCD15", "TAGS": "TagA"}
    if isinstance(properties, dict):
        properties = encode_properties(properties).encode()
    return record_bytes(
        body=body,
        topic=topic,
        properties=properties,
        born_host=born_host,
        store_host=store_host,
        sys_flag=sys_flag,
        queue_id=queue_id,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        born_timestamp=born_timestamp,
        store_timestamp=store_timestamp,
        reconsume_times=reconsume_times,
    )


def expected_rows(data: bytes) -> list[dict]:
    """What the reference decoder says each row must hold."""
    return [
        {
            "topic": TOPIC,
            "broker_name": BROKER,
            "queue_id": message.queue_id,
            "queue_offset": message.queue_offset,
            "msg_id": message.msg_id,
            "keys": message.properties.get("KEYS"),
            "tags": message.tags,
            "body": decompress(message.body, message.sys_flag),
            # in the dict's order and without repeats: a map must not carry a name twice
            "properties": list(message.properties.items()),
            "born_timestamp": microseconds(message.born_timestamp),
            "store_timestamp": microseconds(message.store_timestamp),
            "reconsume_times": message.reconsume_times,
        }
        for message in iter_records(data)
    ]


def microseconds(milliseconds: int) -> int | None:
    """The timestamp column's value: null beyond what int64 microseconds can hold."""
    value = milliseconds * 1000
    return value if -(2**63) <= value < 2**63 else None


def decoded_rows(data: bytes) -> list[dict]:
    """The batch's rows, timestamps as int64 microseconds (datetime stops at year 9999)."""
    batch = decode_pull_body(data, TOPIC, BROKER)
    assert batch.schema == arrow_schema()
    batch.validate(full=True)
    for name in ("born_timestamp", "store_timestamp"):
        index = batch.schema.get_field_index(name)
        batch = batch.set_column(index, name, batch.column(index).cast(pa.int64()))
    return batch.to_pylist()


def assert_matches_reference(data: bytes) -> list[dict]:
    rows = decoded_rows(data)
    expected = expected_rows(data)
    assert len(rows) == len(expected)
    for index, (row, want) in enumerate(zip(rows, expected, strict=True)):
        assert row == want, f"row {index}"
    return rows


# --- whole bodies ------------------------------------------------------------------------------


def test_many_records_with_typical_properties():
    records = []
    for index in range(300):
        properties = {"UNIQ_KEY": f"7F000001303901230000{index:012X}", "WAIT": "true"}
        if index % 2:
            properties["TAGS"] = f"Tag{index % 5}"
        if index % 3 == 0:
            properties["KEYS"] = f"order-{index} user-{index * 7}"
        properties["CLUSTER"] = "DefaultCluster"
        records.append(
            record(
                body=bytes(range(256))[: index % 130],
                properties=properties,
                queue_offset=1000 + index,
                physical_offset=5000 + 200 * index,
                born_timestamp=1700000000000 + index,
                store_timestamp=1700000000100 + 3 * index,
                reconsume_times=index % 4,
                queue_id=index % 8,
            )
        )
    rows = assert_matches_reference(b"".join(records))
    assert rows[3]["keys"] == "order-3 user-21"
    assert rows[3]["tags"] == "Tag3"
    assert rows[2]["tags"] is None


def test_the_worked_example_of_the_spec():
    example = record(
        properties={
            "UNIQ_KEY": "7F00000130390123ABCD0000075BCD15",
            "TAGS": "TagA",
            "WAIT": "true",
            "CLUSTER": "DefaultCluster",
        },
        queue_id=0,
    )
    assert len(example) == 190
    (row,) = assert_matches_reference(example)
    assert row["msg_id"] == "7F00000130390123ABCD0000075BCD15"
    (row,) = decode_pull_body(example, TOPIC, BROKER).to_pylist()
    assert row["born_timestamp"] == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert row["store_timestamp"] == datetime(2023, 11, 14, 22, 13, 20, 5000, tzinfo=UTC)


def test_a_timestamp_beyond_int64_microseconds_is_null():
    data = record(born_timestamp=2**63 - 1) + record(store_timestamp=-(2**62)) + record()
    rows = assert_matches_reference(data)
    assert [row["born_timestamp"] is None for row in rows] == [True, False, False]
    assert [row["store_timestamp"] is None for row in rows] == [False, True, False]


def test_without_uniq_key_the_msg_id_is_the_offset_id():
    data = record(properties={"TAGS": "TagA"}) + record(
        properties={"UNIQ_KEY": "", "KEYS": "k"}, physical_offset=0x1234
    )
    rows = assert_matches_reference(data)
    assert rows[0]["msg_id"] == "C0A8000100002A9F0000000000000000"
    assert rows[1]["msg_id"] == "C0A8000100002A9F0000000000001234"


@pytest.mark.parametrize("born_host", [BORN_V4, BORN_V6], ids=["born-v4", "born-v6"])
@pytest.mark.parametrize("store_host", [STORE_V4, STORE_V6], ids=["store-v4", "store-v6"])
def test_ipv6_hosts_move_the_fields_after_them(born_host, store_host):
    data = b"".join(
        record(
            born_host=born_host if index % 2 else BORN_V4,
            store_host=store_host if index % 3 else STORE_V4,
            properties={"TAGS": "t"} if index % 2 else None,
            physical_offset=777 * index,
            store_timestamp=1700000000005 + index,
        )
        for index in range(7)
    )
    rows = assert_matches_reference(data)
    if store_host is STORE_V6:
        # 16 address bytes, the port, the CommitLog offset 777
        assert rows[1]["msg_id"] == "20010DB8000000000000000000000001" + "00002A9F" + "309".zfill(
            16
        )


def test_a_topic_over_127_bytes_is_a_v2_record():
    long_topic = b"%RETRY%" + b"g" * 200
    data = record(topic=long_topic) + record(properties={"KEYS": "a b"}) + record(topic=long_topic)
    assert struct.unpack_from(">i", data, 4)[0] == MAGIC_V2
    assert_matches_reference(data)


@pytest.mark.parametrize(
    ("sys_flag", "pack"),
    [
        (CompressionType.ZLIB.sys_flag, lambda body: compress(body, CompressionType.ZLIB)),
        (CompressionType.ZSTD.sys_flag, lambda body: compress(body, CompressionType.ZSTD)),
        (COMPRESSED, lambda body: compress(body, CompressionType.ZLIB)),  # legacy: type 0 = zlib
    ],
    ids=["zlib", "zstd", "legacy-zlib"],
)
def test_compressed_bodies_are_inflated(sys_flag, pack):
    plain = b"a compressible body " * 300
    data = (
        record(body=b"plain before")
        + record(body=pack(plain), sys_flag=sys_flag)
        + record(body=b"plain after")
        + record(body=pack(b"second"), sys_flag=sys_flag)
    )
    rows = assert_matches_reference(data)
    assert [row["body"] for row in rows] == [b"plain before", plain, b"plain after", b"second"]


def test_a_body_that_does_not_inflate_is_a_record_error():
    data = record() + record(body=b"not zlib at all", sys_flag=CompressionType.ZLIB.sys_flag)
    with pytest.raises(RecordError, match=f"record at {len(record())}"):
        decode_pull_body(data, TOPIC, BROKER)


@pytest.mark.parametrize(
    "properties",
    [
        b"",
        b"\x02",
        b"\x02\x02\x02",
        b"no separators at all",
        b"\x01value-without-name\x02",
        b"name-without-value\x01\x02",
        b"k\x01v",  # the last pair without its 0x02
        b"k\x01v\x01more\x02",  # the value keeps every 0x01 after the first
        b"TAGS\x01first\x02WAIT\x01true\x02TAGS\x01second\x02",  # the last value wins
        b"UNIQ_KEY\x01A\x02UNIQ_KEY\x01B\x02",  # a batch stored by 5.x: two UNIQ_KEYs
        b"\x00\x01\x00\x02",
        "Schlüssel\x01värde ☃\x02KEYS\x01ключ 键\x02".encode(),
    ],
)
def test_odd_properties_are_split_as_parse_properties_splits_them(properties):
    # alone, and among well-formed records, which then take the general path too
    assert_matches_reference(record(properties=properties))
    assert_matches_reference(record() + record(properties=properties) + record())


def test_empty_properties_give_an_empty_map():
    rows = assert_matches_reference(record(properties=b"") + record(properties={}))
    assert [row["properties"] for row in rows] == [[], []]
    assert [row["msg_id"] for row in rows] == ["C0A8000100002A9F0000000000000000"] * 2


def test_an_empty_body_is_an_empty_batch():
    batch = decode_pull_body(b"", TOPIC, BROKER)
    assert batch.num_rows == 0
    assert batch.schema == arrow_schema()


def test_the_batch_does_not_keep_the_received_buffer():
    received = bytearray(record(body=b"original", properties={"TAGS": "t"}))
    batch = decode_pull_body(received, TOPIC, BROKER)
    received[:] = bytes(len(received))  # a reader reuses its buffer for the next pull
    received.clear()  # BufferError if anything still held an export of it
    assert batch.column("body").to_pylist() == [b"original"]
    assert batch.column("properties").to_pylist() == [[("TAGS", "t")]]


def test_memoryview_input():
    data = record() + record(properties={"KEYS": "k"})
    from_view = decode_pull_body(memoryview(data), TOPIC, BROKER)
    assert from_view.equals(decode_pull_body(data, TOPIC, BROKER))


# --- garbled bodies ------------------------------------------------------------------------------

GOOD = record(properties={"TAGS": "TagA", "UNIQ_KEY": "ABC"})


def _with(data: bytes, at: int, packed: bytes) -> bytes:
    return data[:at] + packed + data[at + len(packed) :]


GARBLED = {
    "bad magic": _with(GOOD, 4, b"\x12\x34\x56\x78"),
    "blank filler": _with(GOOD, 4, struct.pack(">i", -875286124)),
    "a torn last record": GOOD + GOOD[:-1],
    "a tail shorter than a size": GOOD + b"\x00\x00",
    "a tail that is only a size": GOOD + struct.pack(">i", len(GOOD)),
    "a size past the end": _with(GOOD, 0, struct.pack(">i", len(GOOD) + 1)),
    "a size too small": _with(GOOD, 0, struct.pack(">i", 20)),
    "a zero size": GOOD + _with(GOOD, 0, struct.pack(">i", 0)),
    "a negative size": GOOD + _with(GOOD, 0, struct.pack(">i", -190)),
    "a body length overrun": _with(GOOD, 84, struct.pack(">i", 10_000)),
    "a negative body length": _with(GOOD, 84, struct.pack(">i", -5)),
    "a topic length overrun": _with(GOOD, 88 + 5, b"\x7f"),
    "a properties length too short": _with(GOOD, 88 + 5 + 1 + 9, struct.pack(">h", 3)),
    "a negative properties length": _with(GOOD, 88 + 5 + 1 + 9, struct.pack(">h", -1)),
    "ipv6 flags on ipv4 hosts": _with(GOOD, 36, struct.pack(">i", BORNHOST_V6 | STOREHOST_V6)),
    "properties that are not UTF-8": record(properties=b"TAGS\x01\xff\xfe\x02"),
    "garbage": b"\xde\xad\xbe\xef" * 40,
}


@pytest.mark.parametrize("data", list(GARBLED.values()), ids=list(GARBLED))
def test_a_garbled_body_is_a_record_error(data):
    with pytest.raises(RecordError):
        list(iter_records(data))  # the reference refuses it too
    with pytest.raises(RecordError, match=r"record|magic"):
        decode_pull_body(data, TOPIC, BROKER)


def test_the_error_names_the_record():
    data = GOOD + GOOD + _with(GOOD, 4, b"\x00\x00\x00\x01")
    with pytest.raises(RecordError, match=f"bad magic code 0x1 at {2 * len(GOOD)}"):
        decode_pull_body(data, TOPIC, BROKER)


# --- property-based: random records against the reference ---------------------------------------

names = st.text(
    st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=12
)
values = st.text(st.characters(codec="utf-8", exclude_characters="\x02"), max_size=40)
well_known = st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "WAIT", "CLUSTER", "MSG_REGION"])
property_maps = st.dictionaries(st.one_of(well_known, names), values, max_size=6)
# raw strings reach what no writer produces: empty pairs, missing separators, repeats
raw_properties = st.lists(
    st.sampled_from(["UNIQ_KEY", "TAGS", "KEYS", "a", "", "\x01", "\x02", "v", "\x01x\x02"]),
    max_size=12,
).map(lambda parts: "".join(parts).encode())
hosts = st.sampled_from(
    [(BORN_V4, STORE_V4), (BORN_V6, STORE_V4), (BORN_V4, STORE_V6), (BORN_V6, STORE_V6)]
)


@st.composite
def records(draw) -> bytes:
    born_host, store_host = draw(hosts)
    compressed = draw(st.booleans()) and draw(st.booleans())
    body = draw(st.binary(max_size=300))
    return record(
        body=compress(body, CompressionType.ZLIB) if compressed else body,
        sys_flag=CompressionType.ZLIB.sys_flag if compressed else 0,
        properties=draw(st.one_of(property_maps, raw_properties)),
        topic=draw(st.sampled_from([b"T", TOPIC.encode(), b"%DLQ%" + b"x" * 150])),
        born_host=born_host,
        store_host=store_host,
        queue_id=draw(st.integers(0, 2**31 - 1)),
        queue_offset=draw(st.integers(0, 2**62)),
        physical_offset=draw(st.integers(0, 2**62)),
        born_timestamp=draw(st.integers(0, 4_102_444_800_000)),
        store_timestamp=draw(st.integers(0, 4_102_444_800_000)),
        reconsume_times=draw(st.integers(0, 16)),
    )


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), max_size=12))
def test_random_records_match_the_reference(bodies):
    assert_matches_reference(b"".join(bodies))


@settings(deadline=None, max_examples=300)
@given(
    st.lists(records(), min_size=1, max_size=4),
    st.data(),
)
def test_a_mutated_body_decodes_as_the_reference_does_or_is_a_record_error(bodies, data):
    mutated = bytearray(b"".join(bodies))
    for _ in range(data.draw(st.integers(1, 3))):
        # a byte, an int16 or an int32 overwritten: sizes and lengths are what break
        at = data.draw(st.integers(0, len(mutated) - 1))
        end = min(at + data.draw(st.sampled_from([1, 2, 4])), len(mutated))
        mutated[at:end] = data.draw(st.binary(min_size=end - at, max_size=end - at))
    if data.draw(st.integers(0, 3)) == 0:
        del mutated[data.draw(st.integers(0, len(mutated))) :]
    mutated = bytes(mutated)
    try:
        rows = decoded_rows(mutated)
    except RecordError:
        return
    try:
        expected = expected_rows(mutated)
    except RecordError as exc:
        # the one thing only decode_record refuses: a topic that is not UTF-8 (the batch
        # takes the topic from the pulled queue and never reads the records' own)
        assert "codec can't decode" in str(exc)
        return
    assert rows == expected


def test_the_arrow_types_are_the_schema_types():
    batch = decode_pull_body(record(), TOPIC, BROKER)
    assert batch.schema.field("properties").type == pa.map_(pa.string(), pa.string())
    assert batch.column("born_timestamp").type == pa.timestamp("us", tz="UTC")
