"""A record's DispatchRequest read straight from the CommitLog bytes, for recovery and for
a slave's replicated records: the fields dispatchers need, nothing decoded or copied for
the rest (no body, no properties dict).

The record is checked as ``decode_record`` checks it (magic, size, every length within
the record, UTF-8 topic and properties, optionally the body CRC), and the properties are
read by the same rules as ``parse_properties`` (the last non-empty value of a name wins),
so the request equals ``dispatch_request(decode_record(...))`` field for field. The
compiled ``_append.dispatch_request`` does the same work; ``read_python`` is the
reference it is tested against (tests/test_record_requests.py).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence

from rocketmq_core.protocol.message import (
    BORNHOST_V6,
    FIXED_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6,
    RecordError,
    StoredMessage,
    decode_record,
    tags_code,
    tags_code_of,
)
from rocketmq_core.store.api import DispatchRequest

# a plugin's own tags code for some records (None: not for this one), e.g. delivery times
TagsCodeRule = Callable[[StoredMessage], int | None]

# size, magic, crc, queue id, flag, queue offset, physical offset, sysFlag (born time skipped)
_HEAD = struct.Struct(">iiiiiqqi")
_HEAD_AT_LEAST = _HEAD.size + 8  # the head and the born timestamp: decode_record's first read
_LONG = struct.Struct(">q")
_TAIL = struct.Struct(">xxxxqi")  # (reconsume times skipped), prepared offset, body length
_SHORT = struct.Struct(">h")
_SMALLEST_RECORD = FIXED_SIZE + 16
_WANTED = ("TAGS", "KEYS", "UNIQ_KEY")

try:  # the compiled reader (setup.py builds it with the append kernel)
    from . import _append
except ImportError:
    compiled_reader = None
else:  # None from a build older than the reader: the Python one serves
    compiled_reader = getattr(_append, "dispatch_request", None)


def read_python(
    buffer: bytes | bytearray | memoryview, position: int, check_crc: bool = False
) -> DispatchRequest:
    """The request of the record at ``position``; RecordError (saying why) if it is not a
    whole, valid record."""
    end_of_buffer = len(buffer)
    if position + _HEAD_AT_LEAST > end_of_buffer:
        raise RecordError(f"no record at {position}: {end_of_buffer - position} bytes left")
    size, magic, crc, queue_id, _flag, queue_offset, physical, sys_flag = _HEAD.unpack_from(
        buffer, position
    )
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise RecordError(f"bad magic code {magic & 0xFFFFFFFF:#x} at {position}")
    end = position + size
    if size < _SMALLEST_RECORD or end > end_of_buffer:
        raise RecordError(
            f"record at {position} claims {size} bytes; {end_of_buffer - position} left"
        )
    at = position + _HEAD_AT_LEAST + (20 if sys_flag & BORNHOST_V6 else 8)
    (store_timestamp,) = _LONG.unpack_from(buffer, at)
    at += 8 + (20 if sys_flag & STOREHOST_V6 else 8)
    if at + _TAIL.size > end:  # IPv6 hosts make the fixed fields longer than the smallest
        raise _garbled(position, size)
    prepared, body_length = _TAIL.unpack_from(buffer, at)
    body_at = at + _TAIL.size
    at = body_at + body_length
    if body_length < 0 or at + 1 > end:
        raise _garbled(position, size)
    if magic == MAGIC_V2:
        if at + 2 > end:
            raise _garbled(position, size)
        (topic_length,) = _SHORT.unpack_from(buffer, at)
        at += 2
    else:
        topic_length = buffer[at]
        at += 1
    topic_at = at
    at += topic_length
    if topic_length < 0 or at + 2 > end:
        raise _garbled(position, size)
    (properties_length,) = _SHORT.unpack_from(buffer, at)
    at += 2
    if properties_length < 0 or at + properties_length != end:
        raise _garbled(position, size)
    try:
        topic = bytes(buffer[topic_at : topic_at + topic_length]).decode()
        properties = bytes(buffer[at:end]).decode()
    except UnicodeDecodeError as exc:
        raise RecordError(f"record at {position} is cut short or garbled: {exc}") from None
    if check_crc and zlib.crc32(buffer[body_at : body_at + body_length]) & 0x7FFFFFFF != crc:
        raise RecordError(f"record at {position}: the body CRC does not match")
    tags = keys = uniq_key = None
    if properties:
        found = _wanted_properties(properties)
        tags, keys, uniq_key = found.get("TAGS"), found.get("KEYS"), found.get("UNIQ_KEY")
    return DispatchRequest(
        topic,
        queue_id,
        physical,
        size,
        tags_code(tags),
        store_timestamp,
        queue_offset,
        keys,
        uniq_key,
        sys_flag,
        prepared,
    )


def _wanted_properties(text: str) -> dict[str, str]:
    """TAGS, KEYS and UNIQ_KEY by ``parse_properties``' rules, the rest skipped."""
    found: dict[str, str] = {}
    for pair in text.split("\x02"):
        name, separator, value = pair.partition("\x01")
        if separator and value and name in _WANTED:
            found[name] = value
    return found


def _garbled(position: int, size: int) -> RecordError:
    return RecordError(f"record at {position}: its fields do not add up to {size} bytes")


def read_request(
    buffer: bytes | bytearray | memoryview,
    position: int,
    check_crc: bool = False,
    rules: Sequence[TagsCodeRule] = (),
) -> DispatchRequest:
    """What the dispatchers were told when the record at ``position`` was appended;
    RecordError if it is not a whole, valid record.

    A tags-code rule sees the whole decoded message, so with rules each record is decoded
    too (today no plugin registers one)."""
    request = None
    if compiled_reader is not None:
        request = compiled_reader(buffer, position, check_crc, DispatchRequest, tags_code_of)
    if request is None:  # not a valid record (the reference says why), or no compiled reader
        request = read_python(buffer, position, check_crc)
    if rules:
        message = decode_record(buffer, position)
        for rule in rules:
            code = rule(message)
            if code is not None:
                request.tags_code = code
                break
    return request
