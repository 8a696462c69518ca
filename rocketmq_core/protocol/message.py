"""The stored-message record (MESSAGE.md §1-6): layout, properties, ids, batches. Sans-IO.

A record is written once, into the CommitLog, and sent as it is in pull, query and
view responses, so ``write_record`` packs straight into the destination buffer.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from ipaddress import ip_address

from ..errors import RocketMQError

MAGIC_V1 = -626843481  # 0xDAA320A7: one-byte topic length
MAGIC_V2 = -626843477  # 0xDAA320AB: two-byte topic length, for topics over 127 bytes
BLANK_MAGIC = -875286124  # 0xCBD43194: end-of-file filler in the CommitLog
BLANK_SIZE = 8

# sysFlag bits (MESSAGE.md §2)
COMPRESSED = 0x1
MULTI_TAGS = 0x2
TRANSACTION_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED = 0x4
TRANSACTION_COMMIT = 0x8
TRANSACTION_ROLLBACK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_LENGTH = 32767
MAX_V1_TOPIC_LENGTH = 127

# the fields up to and including BORNTIMESTAMP, then BORNHOST (variable)
_HEAD = struct.Struct(">iiiiiqqiq")  # total, magic, crc, queue, flag, qoffset, phys, sys, born
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_MIDDLE = struct.Struct(">q")  # store timestamp (between the two hosts)
_TAIL = struct.Struct(">iqi")  # reconsume times, prepared transaction offset, body length
_BLANK = struct.Struct(">ii")
FIXED_SIZE = _HEAD.size + _MIDDLE.size + _TAIL.size + 2  # + hosts, body, topic, properties

# where a record holds its own commit-log offset (before the hosts: IPv4 and IPv6 alike)
PHYSICAL_OFFSET_AT = 28


def pack_host(host: str, port: int) -> bytes:
    """Address bytes (4 or 16) and the port as int32, as records and msg ids carry them."""
    return ip_address(host).packed + _INT.pack(port)


def host_is_v6(packed: bytes) -> bool:
    return len(packed) == 20


def unpack_host(packed: bytes) -> tuple[str, int]:
    return str(ip_address(packed[:-4])), _INT.unpack(packed[-4:])[0]


@functools.lru_cache(maxsize=1024)
def host_address(packed: bytes) -> str:
    """``ip:port`` (``[v6]:port``) of packed host bytes; cached, as every record repeats
    the same few hosts and parsing one costs more than the rest of a decode."""
    ip, port = unpack_host(packed)
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


# a host in a record: its address and port (IPv4 4 + 4 bytes, IPv6 16 + 4)
HOST_V4_SIZE = 8
HOST_V6_SIZE = 20


def record_size(body: int, topic: int, properties: int, born_v6: bool, store_v6: bool) -> int:
    topic_length_size = 1 if topic <= MAX_V1_TOPIC_LENGTH else 2
    hosts = (HOST_V6_SIZE if born_v6 else HOST_V4_SIZE) + (
        HOST_V6_SIZE if store_v6 else HOST_V4_SIZE
    )
    return FIXED_SIZE + hosts + body + topic_length_size + topic + properties


def with_host_flags(sys_flag: int, born_host: bytes, store_host: bytes) -> int:
    """``sys_flag`` with its IPv6 bits set to match the two hosts (the record's layout)."""
    sys_flag &= ~(BORNHOST_V6 | STOREHOST_V6)
    if host_is_v6(born_host):
        sys_flag |= BORNHOST_V6
    if host_is_v6(store_host):
        sys_flag |= STOREHOST_V6
    return sys_flag


def write_record(
    buffer: bytearray | memoryview,
    position: int,
    size: int,
    body: bytes,
    body_crc: int,
    topic: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> None:
    """Pack one record at ``position``; ``size`` from ``record_size``.

    ``sys_flag`` must already carry the IPv6 bits that match the hosts. The size and
    magic code are written last: a process killed mid-record leaves no magic there, so
    recovery cannot take a record whose properties were never written (the body CRC
    would not notice).
    """
    topic_length = len(topic)
    if topic_length <= MAX_V1_TOPIC_LENGTH and len(born_host) == 8 and len(store_host) == 8:
        # the common record (V1, IPv4 hosts): everything up to the body in one pack
        _V1_V4_FRONT.pack_into(
            buffer,
            position,
            0,
            0,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
        at = position + _V1_V4_FRONT.size
        end = at + len(body)
        buffer[at:end] = body
        _topic_struct(topic_length).pack_into(buffer, end, topic_length, topic, len(properties))
        at = end + topic_length + 3
        buffer[at : at + len(properties)] = properties
        _BLANK.pack_into(buffer, position, size, MAGIC_V1)  # the record is whole from here
        return
    v2 = topic_length > MAX_V1_TOPIC_LENGTH
    _HEAD.pack_into(
        buffer,
        position,
        0,
        0,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
    )
    at = position + _HEAD.size
    end = at + len(born_host)
    buffer[at:end] = born_host
    _MIDDLE.pack_into(buffer, end, store_timestamp)
    at = end + 8
    end = at + len(store_host)
    buffer[at:end] = store_host
    _TAIL.pack_into(buffer, end, reconsume_times, prepared_transaction_offset, len(body))
    at = end + _TAIL.size
    end = at + len(body)
    buffer[at:end] = body
    if v2:
        _SHORT.pack_into(buffer, end, topic_length)
        at = end + 2
    else:
        buffer[end] = topic_length
        at = end + 1
    end = at + topic_length
    buffer[at:end] = topic
    _SHORT.pack_into(buffer, end, len(properties))
    at = end + 2
    buffer[at : at + len(properties)] = properties
    _BLANK.pack_into(buffer, position, size, MAGIC_V2 if v2 else MAGIC_V1)


_V1_V4_FRONT = struct.Struct(">iiiiiqqiq8sq8siqi")
_TOPIC_STRUCTS: dict[int, struct.Struct] = {}


def _topic_struct(length: int) -> struct.Struct:
    """Topic length byte, topic, properties length: one pack per distinct topic length."""
    packer = _TOPIC_STRUCTS.get(length)
    if packer is None:
        packer = _TOPIC_STRUCTS[length] = struct.Struct(f">B{length}sh")
    return packer


def write_blank(buffer: bytearray | memoryview, position: int, bytes_left: int) -> None:
    """The end-of-file filler: the rest of this file holds no record."""
    _BLANK.pack_into(buffer, position, bytes_left, BLANK_MAGIC)


def body_crc(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(slots=True)
class StoredMessage:
    """A decoded record: what consumers see, and what recovery checks."""

    size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """What clients show: UNIQ_KEY when the producer set one, else the offset id."""
        return self.properties.get("UNIQ_KEY") or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> list[str]:
        return [key for key in self.properties.get("KEYS", "").split(" ") if key]


class RecordError(RocketMQError, ValueError):
    """Bytes that are not a whole, valid record (a torn tail, garbage, a bad CRC)."""


def peek_record(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    """(total size, magic) of the record at ``position``, without decoding the rest."""
    if position + 8 > len(buffer):
        raise RecordError(f"no record header at {position}: the buffer ends")
    size, magic = _BLANK.unpack_from(buffer, position)
    return size, magic


_STORE_TIME_AT = {False: 56, True: 68}  # after an IPv4 / IPv6 born host
_SYS_FLAG_AT = 36


def record_store_time(record: bytes | memoryview) -> int:
    """The store timestamp of a whole record, without decoding the rest."""
    (sys_flag,) = _INT.unpack_from(record, _SYS_FLAG_AT)
    store_time: int = _LONG.unpack_from(record, _STORE_TIME_AT[bool(sys_flag & BORNHOST_V6)])[0]
    return store_time


def decode_record(
    buffer: bytes | bytearray | memoryview, position: int = 0, *, check_crc: bool = False
) -> StoredMessage:
    """Decode the record at ``position``; RecordError if it is not a whole, valid one."""
    end_of_buffer = len(buffer)
    if position + _HEAD.size > end_of_buffer:
        raise RecordError(f"no record at {position}: {end_of_buffer - position} bytes left")
    (size, magic, crc, queue_id, flag, queue_offset, physical, sys_flag, born) = _HEAD.unpack_from(
        buffer, position
    )
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise RecordError(f"bad magic code {magic & 0xFFFFFFFF:#x} at {position}")
    if size < FIXED_SIZE + 16 or position + size > end_of_buffer:
        raise RecordError(
            f"record at {position} claims {size} bytes; {end_of_buffer - position} left"
        )
    try:
        at = position + _HEAD.size
        born_length = 20 if sys_flag & BORNHOST_V6 else 8
        born_host = bytes(buffer[at : at + born_length])
        at += born_length
        (store_timestamp,) = _MIDDLE.unpack_from(buffer, at)
        at += 8
        store_length = 20 if sys_flag & STOREHOST_V6 else 8
        store_host = bytes(buffer[at : at + store_length])
        at += store_length
        reconsume, prepared, body_length = _TAIL.unpack_from(buffer, at)
        at += _TAIL.size
        body = bytes(buffer[at : at + body_length])
        at += body_length
        if magic == MAGIC_V2:
            (topic_length,) = _SHORT.unpack_from(buffer, at)
            at += 2
        else:
            topic_length = buffer[at]
            at += 1
        topic = bytes(buffer[at : at + topic_length]).decode()
        at += topic_length
        (properties_length,) = _SHORT.unpack_from(buffer, at)
        at += 2
        properties = bytes(buffer[at : at + properties_length]).decode()
        at += properties_length
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RecordError(f"record at {position} is cut short or garbled: {exc}") from None
    lengths = (body_length, topic_length, properties_length)
    if at - position != size or min(lengths) < 0 or len(body) != body_length:
        raise RecordError(f"record at {position}: its fields do not add up to {size} bytes")
    if check_crc and body_crc(body) != crc:
        raise RecordError(f"record at {position}: the body CRC does not match")
    return StoredMessage(
        size,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical,
        sys_flag,
        born,
        born_host,
        store_timestamp,
        store_host,
        reconsume,
        prepared,
        body,
        topic,
        parse_properties(properties),
    )


def iter_records(data: bytes | memoryview) -> Iterator[StoredMessage]:
    """Every record of a pull/query body (records back to back)."""
    position = 0
    while position < len(data):
        message = decode_record(data, position)
        yield message
        position += message.size


# --- properties ---------------------------------------------------------------------------


def encode_properties(properties: Mapping[str, str]) -> str:
    """``k\\x01v\\x02`` per pair; pairs with an empty key or value are dropped (Java)."""
    return "".join(
        f"{key}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}"
        for key, value in properties.items()
        if key and value is not None and value != ""
    )


def parse_properties(text: str) -> dict[str, str]:
    """Java's rules: split on 0x02, then at the first 0x01; empty keys or values dropped."""
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        key, separator, value = pair.partition(NAME_VALUE_SEPARATOR)
        if separator and key and value:
            result[key] = value
    return result


def property_value(properties: bytes, name: bytes) -> bytes | None:
    """One property from an encoded string, without parsing the rest (hot path)."""
    start = 0
    needle = name + b"\x01"
    while True:
        found = properties.find(needle, start)
        if found < 0:
            return None
        if found == 0 or properties[found - 1] == 2:  # a key, not the tail of a value
            value_start = found + len(needle)
            value_end = properties.find(b"\x02", value_start)
            return properties[value_start : value_end if value_end >= 0 else len(properties)]
        start = found + 1


# --- hashes and ids ------------------------------------------------------------------------

_TAGS_CODES: dict[str, int] = {}


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode``: over UTF-16 code units, int32 wrap-around."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + (data[index] << 8 | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def tags_code(tags: str | None) -> int:
    """The consume-queue tagsCode of a TAGS value (0 when untagged); cached, tags repeat."""
    if not tags:
        return 0
    code = _TAGS_CODES.get(tags)
    if code is None:
        code = java_string_hash(tags)
        if len(_TAGS_CODES) < 65536:
            _TAGS_CODES[tags] = code
    return code


_TAGS_CODES_OF_BYTES: dict[bytes, int] = {}


def tags_code_of(tags: bytes) -> int:
    """``tags_code`` of a TAGS value as stored (UTF-8), cached by those bytes."""
    code = _TAGS_CODES_OF_BYTES.get(tags)
    if code is None:
        code = tags_code(tags.decode())
        if len(_TAGS_CODES_OF_BYTES) < 65536:
            _TAGS_CODES_OF_BYTES[tags] = code
    return code


def offset_msg_id(store_host: bytes, commit_log_offset: int) -> str:
    """The broker's message id: store address, port and CommitLog offset, in upper hex."""
    return (store_host + _LONG.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[bytes, int]:
    """(packed store host, CommitLog offset) of an offset message id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"message id {msg_id!r} is not hexadecimal") from None
    if len(raw) not in (16, 28):
        raise ValueError(f"message id {msg_id!r} is neither 32 nor 56 hex digits")
    return raw[:-8], _LONG.unpack(raw[-8:])[0]


# --- batches -------------------------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">iiiii")  # total, magic, crc, flag, body length
BATCH_RECORD_OVERHEAD = _BATCH_HEAD.size + 2  # a batch record: this + body + properties


@dataclass(slots=True)
class BatchItem:
    flag: int
    body: bytes
    properties: bytes


def iter_batch(data: bytes) -> Iterator[BatchItem]:
    """The records of a SEND_BATCH_MESSAGE body (MESSAGE.md §6); RecordError if malformed."""
    position = 0
    size = len(data)
    head_size = _BATCH_HEAD.size
    unpack_head = _BATCH_HEAD.unpack_from
    unpack_short = _SHORT.unpack_from
    while position < size:
        if position + head_size > size:
            raise RecordError(f"batch record at {position} is cut short")
        total, _magic, _crc, flag, body_length = unpack_head(data, position)
        at = position + head_size
        if body_length < 0 or at + body_length + 2 > size:
            raise RecordError(f"batch record at {position}: body length {body_length} overruns")
        body = data[at : at + body_length]  # a slice of bytes is bytes: one copy
        at += body_length
        (properties_length,) = unpack_short(data, at)
        at += 2
        if properties_length < 0 or at + properties_length > size:
            raise RecordError(f"batch record at {position}: properties overrun the body")
        properties = data[at : at + properties_length]
        at += properties_length
        if total != at - position:
            raise RecordError(f"batch record at {position}: total size {total} is wrong")
        yield BatchItem(flag, body, properties)
        position = at


def encode_batch(items: list[BatchItem]) -> bytes:
    """A batch body as producers write it (magic and CRC 0)."""
    parts = []
    for item in items:
        total = BATCH_RECORD_OVERHEAD + len(item.body) + len(item.properties)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, item.flag, len(item.body)))
        parts.append(item.body)
        parts.append(_SHORT.pack(len(item.properties)))
        parts.append(item.properties)
    return b"".join(parts)
