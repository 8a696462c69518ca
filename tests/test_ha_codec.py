"""The HA port's byte streams (docs/spec/HA.md §2): exact bytes, any split, bad sizes."""

import pytest

from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol.ha import (
    DEFAULT_TRANSFER_BATCH,
    HEADER_SIZE,
    MAX_TRANSFER_BODY,
    REPORT_SIZE,
    OffsetReportReader,
    Transfer,
    TransferReader,
    encode_offset_report,
    encode_transfer_header,
)


def test_sizes_match_the_wire():
    assert (REPORT_SIZE, HEADER_SIZE, DEFAULT_TRANSFER_BATCH) == (8, 12, 32768)
    assert MAX_TRANSFER_BODY == 4 * 1024 * 1024 - 12


@pytest.mark.parametrize(
    ("offset", "wire"),
    [
        (0, b"\x00" * 8),
        (1, b"\x00" * 7 + b"\x01"),
        (0x0102030405060708, bytes(range(1, 9))),
        (1 << 30, b"\x00\x00\x00\x00\x40\x00\x00\x00"),
        (-1, b"\xff" * 8),
    ],
)
def test_offset_report_bytes(offset, wire):
    assert encode_offset_report(offset) == wire
    assert OffsetReportReader().feed(wire) == offset


@pytest.mark.parametrize(
    ("offset", "size", "wire"),
    [
        (0, 0, b"\x00" * 12),
        (1 << 30, 32768, b"\x00\x00\x00\x00\x40\x00\x00\x00" + b"\x00\x00\x80\x00"),
        (0x0102030405060708, 0x0A0B0C0D, bytes(range(1, 9)) + b"\x0a\x0b\x0c\x0d"),
    ],
)
def test_transfer_header_bytes(offset, size, wire):
    assert encode_transfer_header(offset, size) == wire


def test_report_reader_yields_only_the_last_whole_value():
    reader = OffsetReportReader()
    stream = b"".join(encode_offset_report(value) for value in (100, 200, 300))
    assert reader.feed(stream + b"\x00\x00\x00") == 300
    assert reader.feed(b"\x00\x00") is None  # still 5 of the next 8 bytes
    assert reader.feed(b"\x00\x01\x90") == 400


def test_report_reader_split_at_every_byte_boundary():
    values = [0, 1 << 30, 123456789, 1 << 40]
    stream = b"".join(encode_offset_report(value) for value in values)
    for cut in range(len(stream) + 1):
        reader = OffsetReportReader()
        first = reader.feed(stream[:cut])
        second = reader.feed(stream[cut:])
        whole_in_first = cut // REPORT_SIZE
        assert first == (values[whole_in_first - 1] if whole_in_first else None)
        assert second == (values[-1] if whole_in_first < len(values) else None)


def test_report_reader_byte_by_byte():
    reader = OffsetReportReader()
    seen = [reader.feed(bytes([byte])) for byte in encode_offset_report(987654321)]
    assert seen == [None] * 7 + [987654321]


def _frame(offset: int, body: bytes) -> bytes:
    return encode_transfer_header(offset, len(body)) + body


FRAMES = [
    Transfer(1 << 30, b"\x01\x02\x03"),
    Transfer((1 << 30) + 3, b""),  # heartbeat: the next offset, nothing to append
    Transfer((1 << 30) + 3, bytes(range(256)) * 3),
    Transfer((1 << 30) + 771, b"x"),
]
STREAM = b"".join(_frame(transfer.offset, transfer.body) for transfer in FRAMES)


def test_transfer_reader_whole_stream():
    assert TransferReader().feed(STREAM) == FRAMES


def test_transfer_reader_split_at_every_byte_boundary():
    for cut in range(len(STREAM) + 1):
        reader = TransferReader()
        assert reader.feed(STREAM[:cut]) + reader.feed(STREAM[cut:]) == FRAMES


def test_transfer_reader_byte_by_byte():
    reader = TransferReader()
    received: list[Transfer] = []
    for index in range(len(STREAM)):
        received += reader.feed(STREAM[index : index + 1])
    assert received == FRAMES


def test_heartbeat_is_an_empty_body():
    assert TransferReader().feed(encode_transfer_header(4096, 0)) == [Transfer(4096, b"")]


def test_negative_size_is_refused():
    with pytest.raises(RemoteProtocolError, match="body size -1"):
        TransferReader().feed(encode_transfer_header(0, -1))


def test_size_above_the_limit_is_refused():
    with pytest.raises(RemoteProtocolError, match="body size 4194293"):
        TransferReader().feed(encode_transfer_header(0, MAX_TRANSFER_BODY + 1))
    reader = TransferReader(max_body=16)
    assert reader.feed(_frame(0, b"y" * 16)) == [Transfer(0, b"y" * 16)]
    with pytest.raises(RemoteProtocolError, match=r"0\.\.16 bytes"):
        reader.feed(encode_transfer_header(16, 17))


def test_limit_sized_body_is_accepted():
    body = b"z" * MAX_TRANSFER_BODY
    assert TransferReader().feed(_frame(8, body)) == [Transfer(8, body)]
