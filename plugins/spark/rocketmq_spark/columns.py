"""A PULL_MESSAGE body (stored records back to back, MESSAGE.md §1) decoded into one Arrow
batch of the source schema, a column at a time rather than a record at a time: one tight
loop finds where the records start (each size leads to the next), numpy reads every field
at byte positions computed for all records at once, Arrow ``take`` copies bodies and
properties out of the received buffer, and numpy splits the properties on their separator
bytes; only compressed bodies are inflated one by one. It checks what ``decode_record``
checks and raises the same ``RecordError``, except that it never reads a record's own
topic (the pulled queue names it).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol.compression import decompress
from rocketmq_core.protocol.message import (
    BORNHOST_V6,
    COMPRESSED,
    FIXED_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6,
    RecordError,
)

from .schema import arrow_schema

_SCHEMA = arrow_schema()

# the fields before BORNHOST sit at the same place in every record
_HEAD = np.dtype(
    [
        ("size", ">i4"),
        ("magic", ">i4"),
        ("body_crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("commit_log_offset", ">i8"),
        ("sys_flag", ">i4"),
        ("born_timestamp", ">i8"),
    ]
)
# a structured dtype always has fields (numpy types them Optional for the others)
_COMMIT_LOG_OFFSET_AT = _HEAD.fields["commit_log_offset"][1]  # type: ignore[index]
# the fields between the store host and the body
_TAIL = np.dtype([("reconsume_times", ">i4"), ("prepared", ">i8"), ("body_length", ">i4")])
_SIZE = struct.Struct(">i")
_IPV4_HOST = 8
_IPV6_HOST = 20
# IPv4 hosts, a one-byte topic length and nothing else: no record is shorter
_SMALLEST_RECORD = FIXED_SIZE + 2 * _IPV4_HOST + 1
_LARGEST_PULL_BODY = 2**31 - 1  # Arrow binary offsets are int32
_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_NAME_VALUE_SEPARATOR = 1
_PROPERTY_SEPARATOR = 2
_TIMESTAMP = _SCHEMA.field("born_timestamp").type
_LARGEST_MILLISECONDS = np.iinfo(np.int64).max // 1000


def decode_pull_body(
    data: bytes | bytearray | memoryview, topic: str, broker_name: str
) -> pa.RecordBatch:
    """Every record of a pull response body as one batch of ``schema.arrow_schema()``.

    ``topic`` and ``broker_name`` name the pulled queue and fill their constant columns;
    ``msg_id`` is UNIQ_KEY, else the offset message id, as ``StoredMessage.msg_id``. The
    batch keeps no reference to ``data``. Raises ``RecordError`` when the bytes are not
    whole, valid records.
    """
    if len(data) > _LARGEST_PULL_BODY:
        raise RecordError(f"a pull body of {len(data)} bytes overflows Arrow's int32 offsets")
    starts = _record_starts(data)
    count = len(starts)
    if count == 0:
        return pa.RecordBatch.from_pylist([], schema=_SCHEMA)
    head = _read(data, starts, _HEAD)
    layout = _Layout(data, starts, head)

    pieces = _record_pieces(data, layout)
    bodies = pieces.take(np.arange(0, 4 * count, 4, dtype=np.int32))
    compressed = np.flatnonzero(head["sys_flag"] & COMPRESSED)
    if len(compressed):
        bodies = _inflate(bodies, compressed, head["sys_flag"], starts)
    properties = _Properties(pieces.take(np.arange(2, 4 * count, 4, dtype=np.int32)), starts)

    (uniq_key, keys, tags), absent = properties.values_of(("UNIQ_KEY", "KEYS", "TAGS"))
    missing = np.flatnonzero(absent[0])
    if len(missing):
        msg_id = _replace_rows(uniq_key, missing, _offset_msg_ids(data, starts, layout, missing))
    else:
        msg_id = uniq_key
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.repeat(pa.scalar(broker_name, pa.string()), count),
            pa.array(head["queue_id"].astype(np.int32)),
            pa.array(head["queue_offset"].astype(np.int64)),
            msg_id,
            keys,
            tags,
            bodies,
            properties.map(),
            _timestamps(head["born_timestamp"]),
            _timestamps(layout.store_timestamp),
            pa.array(layout.reconsume_times),
        ],
        schema=_SCHEMA,
    )


def _record_starts(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Where each record starts: the one sequential step, as each size leads to the next."""
    starts: list[int] = []
    append = starts.append
    unpack = _SIZE.unpack_from
    end = len(data)
    position = 0
    try:
        while position < end:
            append(position)
            (size,) = unpack(data, position)
            if size < _SMALLEST_RECORD:
                raise RecordError(f"record at {position} claims {size} bytes, too few for one")
            position += size
    except struct.error:
        raise RecordError(f"no record at {position}: {end - position} bytes left") from None
    if position != end:
        last = starts[-1]
        raise RecordError(f"record at {last} claims {position - last} bytes; {end - last} left")
    return np.array(starts, dtype=np.int64)


def _read(data: bytes | bytearray | memoryview, positions: np.ndarray, dtype) -> np.ndarray:
    """An item of ``dtype`` read at each byte position of ``data`` (each must fit inside).

    One array whose items start at every byte, overlapping, lets a fancy index read them
    all at once, unaligned and big-endian; it reads opaque bytes and views them as
    ``dtype`` because numpy indexes a structured dtype field by field, ten times slower.
    """
    dtype = np.dtype(dtype)
    raw = np.dtype((np.void, dtype.itemsize))
    at_every_byte = np.ndarray((len(data) - dtype.itemsize + 1,), raw, buffer=data, strides=(1,))
    return at_every_byte[positions].view(dtype)


class _Layout:
    """Where each record's variable fields are, checked as ``decode_record`` checks them."""

    def __init__(
        self, data: bytes | bytearray | memoryview, starts: np.ndarray, head: np.ndarray
    ) -> None:
        magic = head["magic"]
        v2 = magic == MAGIC_V2
        sys_flag = head["sys_flag"]
        self.record_end = starts + head["size"]
        # an IPv6 host is 12 bytes longer than an IPv4 one
        store_timestamp_at = (
            starts + (_HEAD.itemsize + _IPV4_HOST) + ((sys_flag & BORNHOST_V6) > 0) * 12
        )
        self.store_host_at = store_timestamp_at + 8
        self.store_host_length = _IPV4_HOST + ((sys_flag & STOREHOST_V6) > 0) * 12
        tail_at = self.store_host_at + self.store_host_length
        self.body_at = tail_at + _TAIL.itemsize
        # a garbled record may point anywhere: the reads are clamped into the buffer, and
        # the one check at the end fails unless every read was inside its own record
        last = len(data)
        # it ends by byte 76, and every record is at least _SMALLEST_RECORD (91) long
        self.store_timestamp = _read(data, store_timestamp_at, ">i8")
        tail = _read(data, np.minimum(tail_at, last - _TAIL.itemsize), _TAIL)
        self.reconsume_times = tail["reconsume_times"].astype(np.int32)
        body_length = tail["body_length"].astype(np.int64)
        self.body_end = self.body_at + body_length
        two_bytes = _read(data, _clamp(self.body_end, last - 2), ">i2").astype(np.int64)
        # V1 reads its one byte unsigned, as decode_record does; V2 a signed int16
        topic_length = np.where(v2, two_bytes, (two_bytes >> 8) & 0xFF)
        properties_length_at = self.body_end + 1 + v2 + topic_length
        properties_length = _read(data, _clamp(properties_length_at, last - 2), ">i2")
        self.properties_at = properties_length_at + 2
        fits = (
            (self.properties_at + properties_length == self.record_end)
            & (body_length >= 0)
            & (topic_length >= 0)
            & (properties_length >= 0)
            & (v2 | (magic == MAGIC_V1))
        )
        if not fits.all():
            first = np.argmax(~fits)
            if magic[first] not in (MAGIC_V1, MAGIC_V2):
                raise RecordError(
                    f"bad magic code {int(magic[first]) & 0xFFFFFFFF:#x} at {starts[first]}"
                )
            size = head["size"][first]
            raise RecordError(
                f"record at {starts[first]}: its fields do not add up to {size} bytes"
            )


def _clamp(positions: np.ndarray, highest: int) -> np.ndarray:
    return np.minimum(np.maximum(positions, 0), highest)


def _record_pieces(data: bytes | bytearray | memoryview, layout: _Layout) -> pa.BinaryArray:
    """A binary array over ``data`` itself: item 4i is record i's body, 4i+2 its properties.

    The items between are the gaps (topic, next header): offsets that only grow need no
    copy, and one ``take`` then gathers every body, another every properties string.
    """
    offsets = np.empty((len(layout.body_at), 4), dtype=np.int32)
    offsets[:, 0] = layout.body_at
    offsets[:, 1] = layout.body_end
    offsets[:, 2] = layout.properties_at
    offsets[:, 3] = layout.record_end
    return pa.BinaryArray.from_buffers(
        pa.binary(), offsets.size - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _inflate(
    bodies: pa.BinaryArray, rows: np.ndarray, sys_flag: np.ndarray, starts: np.ndarray
) -> pa.BinaryArray:
    """The bodies with those of ``rows`` (compressed) inflated, one call per such row."""
    inflated = []
    for row in rows.tolist():
        try:
            inflated.append(decompress(bodies[row].as_py(), int(sys_flag[row])))
        except RemoteProtocolError as exc:
            raise RecordError(f"record at {starts[row]}: {exc}") from None
    return _replace_rows(bodies, rows, pa.array(inflated, pa.binary()))


def _replace_rows(column: pa.Array, rows: np.ndarray, replacements: pa.Array) -> pa.Array:
    """``column`` with its items at ``rows`` (ascending) replaced, in order, by ``replacements``."""
    positions = np.arange(len(column))
    positions[rows] = len(column) + np.arange(len(rows))
    return pa.concat_arrays([column, replacements]).take(positions)


def _offset_msg_ids(
    data: bytes | bytearray | memoryview, starts: np.ndarray, layout: _Layout, rows: np.ndarray
) -> pa.StringArray:
    """The offset message id of each of ``rows`` (ascending), as ``offset_msg_id`` spells it:
    upper hex of the store host (IPv4 or IPv6) and the CommitLog offset."""
    groups, ids = [], []
    for width in (_IPV4_HOST, _IPV6_HOST):
        group = rows[layout.store_host_length[rows] == width]
        if not len(group):
            continue
        store_host = _read(data, layout.store_host_at[group], np.dtype((np.void, width)))
        commit_log_offset = _read(
            data, starts[group] + _COMMIT_LOG_OFFSET_AT, np.dtype((np.void, 8))
        )
        id_bytes = np.hstack(
            [
                store_host.view(np.uint8).reshape(len(group), width),
                commit_log_offset.view(np.uint8).reshape(len(group), 8),
            ]
        )
        digits = np.empty((len(group), 2 * id_bytes.shape[1]), dtype=np.uint8)
        digits[:, 0::2] = _HEX_DIGITS[id_bytes >> 4]
        digits[:, 1::2] = _HEX_DIGITS[id_bytes & 0xF]
        offsets = np.arange(len(group) + 1, dtype=np.int32) * digits.shape[1]
        ids.append(
            pa.StringArray.from_buffers(len(group), pa.py_buffer(offsets), pa.py_buffer(digits))
        )
        groups.append(group)
    if len(ids) == 1:
        return ids[0]
    return pa.concat_arrays(ids).take(np.argsort(np.concatenate(groups)))


def _timestamps(milliseconds: np.ndarray) -> pa.TimestampArray:
    """Microsecond timestamps; null where the milliseconds would overflow them (a producer
    sets the born timestamp, and one absurd value must not fail the whole pull)."""
    milliseconds = milliseconds.astype(np.int64)
    microseconds = milliseconds * 1000
    overflows = (milliseconds > _LARGEST_MILLISECONDS) | (milliseconds < -_LARGEST_MILLISECONDS)
    if overflows.any():
        return pa.array(microseconds, _TIMESTAMP, mask=overflows)
    return pa.Array.from_buffers(_TIMESTAMP, len(microseconds), [None, pa.py_buffer(microseconds)])


class _Properties:
    """Every record's properties, split as ``parse_properties`` splits them: pairs end at
    0x02, the name at the first 0x01, pairs with an empty name or value are dropped, and a
    repeated name keeps its first place and its last value (as a dict does)."""

    def __init__(self, text: pa.BinaryArray, starts: np.ndarray) -> None:
        count = len(text)
        self._count = count
        _check_utf8(text, starts)
        _, offsets_buffer, data_buffer = text.buffers()
        bounds = np.frombuffer(offsets_buffer, np.int32, count + 1, text.offset * 4)
        bounds = bounds.astype(np.int64)
        if data_buffer is None:
            chars = np.empty(0, dtype=np.uint8)
        else:
            chars = np.frombuffer(data_buffer, np.uint8)[bounds[0] : bounds[-1]]
        bounds -= bounds[0]
        pairs = _split_well_formed(chars, bounds)
        if pairs is None:
            pairs = _split_any(chars, bounds)
        pair_start, name_end, pair_end, pair_row = pairs
        names, values = _names_and_values(chars, pair_start, name_end, pair_end)
        encoded = names.dictionary_encode()
        codes = np.asarray(encoded.indices)
        distinct_names = encoded.dictionary
        pair_key = pair_row * len(distinct_names) + codes
        if _has_repeats(pair_key, count * len(distinct_names)):
            keep, value_from = _last_value_first_place(pair_key)
            names, values = names.take(keep), values.take(value_from)
            codes, pair_row = codes[keep], pair_row[keep]
        self._names, self._values, self._codes, self._pair_row = names, values, codes, pair_row
        self._distinct_names = distinct_names

    def _codes_of(self, names: tuple[str, ...]) -> list[int | None]:
        if len(self._distinct_names) <= 64:  # a dict is quicker than index_in for a few
            code_of = {name: code for code, name in enumerate(self._distinct_names.to_pylist())}
            return [code_of.get(name) for name in names]
        return pc.index_in(pa.array(names, pa.string()), value_set=self._distinct_names).to_pylist()

    def map(self) -> pa.MapArray:
        offsets = np.zeros(self._count + 1, dtype=np.int32)
        np.cumsum(np.bincount(self._pair_row, minlength=self._count), out=offsets[1:])
        return pa.MapArray.from_arrays(
            pa.array(offsets), self._names, self._values, type=_SCHEMA.field("properties").type
        )

    def values_of(self, names: tuple[str, ...]) -> tuple[list[pa.StringArray], np.ndarray]:
        """The value of each of ``names`` in each record (null where it has none), and
        where it has none as a bool array (one row per name); one ``take`` for them all."""
        count = self._count
        column_of_code = np.full(len(self._distinct_names), -1)
        for column, code in enumerate(self._codes_of(names)):
            if code is not None:
                column_of_code[code] = column
        column = column_of_code[self._codes]
        wanted = np.flatnonzero(column >= 0)
        source = np.full((len(names), count), -1)
        source[column[wanted], self._pair_row[wanted]] = wanted
        absent = source < 0
        found = self._values.take(pa.array(source.ravel(), mask=absent.ravel()))
        return [found.slice(row * count, count) for row in range(len(names))], absent


def _check_utf8(text: pa.BinaryArray, starts: np.ndarray) -> None:
    try:
        text.view(pa.string()).validate(full=True)
    except pa.ArrowInvalid:
        for row, properties in enumerate(text.to_pylist()):  # only to name the record
            try:
                properties.decode()
            except UnicodeDecodeError as exc:
                raise RecordError(f"record at {starts[row]}: its properties: {exc}") from None
        raise


def _split_well_formed(chars: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """``_split_any`` for properties as writers write them, or None if some are not.

    Well formed: every pair is ``name 0x01 value 0x02``, both non-empty, no other 0x01 in
    the value, and each record's string ends with 0x02. Then the separators simply
    alternate and need no search for where each segment starts.
    """
    # one pass finds both separators (and 0x00, which then fails the check below)
    separators = np.flatnonzero(chars <= _PROPERTY_SEPARATOR)
    name_end, pair_end = separators[0::2], separators[1::2]
    if len(name_end) != len(pair_end):
        return None
    if not (
        (chars[name_end] == _NAME_VALUE_SEPARATOR).all()
        and (chars[pair_end] == _PROPERTY_SEPARATOR).all()
    ):
        return None
    record_end = bounds[1:][bounds[1:] > bounds[:-1]]
    if not (chars[record_end - 1] == _PROPERTY_SEPARATOR).all():
        return None  # a record without the final 0x02 would merge into the next
    pair_start = np.empty_like(pair_end)
    pair_start[:1] = 0
    pair_start[1:] = pair_end[:-1] + 1
    if not ((name_end > pair_start).all() and (pair_end > name_end + 1).all()):
        return None
    per_record = np.diff(np.searchsorted(pair_end, bounds))
    return pair_start, name_end, pair_end, np.repeat(np.arange(len(per_record)), per_record)


def _split_any(chars: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, ...]:
    """Start, name end (the first 0x01), end and record of every kept pair in ``chars``,
    the properties strings of all records back to back, record i at bounds[i:i+2]."""
    count = len(bounds) - 1
    separators = np.flatnonzero(chars == _PROPERTY_SEPARATOR)
    # record i holds separators[before[i]:before[i+1]], so 1 + that many segments
    before = np.searchsorted(separators, bounds)
    per_record = np.diff(before)
    records = np.arange(count)
    first_segment = before[:-1] + records
    separator_segment = np.arange(len(separators)) + np.repeat(records, per_record)
    segment_start = np.empty(len(separators) + count, dtype=np.int64)
    segment_end = np.empty_like(segment_start)
    segment_start[first_segment] = bounds[:-1]
    segment_start[separator_segment + 1] = separators + 1
    segment_end[separator_segment] = separators
    segment_end[first_segment + per_record] = bounds[1:]
    segment_record = np.repeat(records, per_record + 1)

    name_ends = np.flatnonzero(chars == _NAME_VALUE_SEPARATOR)
    # past every segment's end: a segment without 0x01 is dropped
    name_ends = np.append(name_ends, len(chars))
    name_end = name_ends[np.searchsorted(name_ends, segment_start)]
    kept = (name_end > segment_start) & (name_end + 1 < segment_end)
    return segment_start[kept], name_end[kept], segment_end[kept], segment_record[kept]


def _names_and_values(
    chars: np.ndarray, pair_start: np.ndarray, name_end: np.ndarray, pair_end: np.ndarray
) -> tuple[pa.StringArray, pa.StringArray]:
    """Names and values of the pairs, cut out of ``chars`` by two ``take`` calls over one
    array whose items 4i and 4i+2 are pair i's name and value."""
    if not len(pair_start):
        return pa.array([], pa.string()), pa.array([], pa.string())
    pieces = np.empty((len(pair_start), 4), dtype=np.int32)
    pieces[:, 0] = pair_start
    pieces[:, 1] = name_end
    pieces[:, 2] = name_end + 1
    pieces[:, 3] = pair_end
    split = pa.StringArray.from_buffers(pieces.size - 1, pa.py_buffer(pieces), pa.py_buffer(chars))
    names = split.take(np.arange(0, pieces.size, 4, dtype=np.int32))
    values = split.take(np.arange(2, pieces.size, 4, dtype=np.int32))
    return names, values


def _has_repeats(keys: np.ndarray, key_range: int) -> bool:
    """Whether any value of ``keys`` (each in range(key_range)) occurs twice."""
    if len(keys) < 2:
        return False
    if key_range <= 4 * len(keys) + 65536:  # a count per possible key is cheaper than a sort
        return bool(np.bincount(keys, minlength=0).max() > 1)
    return len(np.unique(keys)) < len(keys)


def _last_value_first_place(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct key: the index of its first occurrence (ascending) and of its last."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    run_first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_last = np.r_[run_first[1:], len(ordered)] - 1
    first, last = order[run_first], order[run_last]
    by_place = np.argsort(first)
    return first[by_place], last[by_place]
