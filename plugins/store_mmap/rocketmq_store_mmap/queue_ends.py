"""The queue-ends summary: where every consume queue starts and ends, written at a clean
stop so that the next start need not list and read the files of thousands of idle queues.

It is trusted only by the start right after the clean stop that wrote it: the store
deletes it at open, and checks it was written against the same CommitLog (its min offset
and end) and the same queue file size. Layout, big-endian: a header (magic, version,
CommitLog min offset and end, queue file size, queue count), per queue its queue id, min
and max offset, retention mark and topic (length-prefixed UTF-8), then a CRC32 of all
that came before.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("rocketmq.store.mmap")

MAGIC = b"RQE1"
_HEADER = struct.Struct(">4sqqqI")  # magic, CommitLog min, CommitLog end, file size, count
_QUEUE = struct.Struct(">iqqqH")  # queue id, min offset, max offset, retention mark, topic length
_CRC = struct.Struct(">I")
NEVER = 2**63 - 1  # a retention mark no CommitLog min offset reaches


@dataclass(frozen=True, slots=True)
class QueueEnds:
    min_offset: int
    max_offset: int
    # the lowest CommitLog min offset at which retention changes the queue (its min
    # entry's record, or all of its oldest file, falls below the log's start)
    retention_mark: int


@dataclass(slots=True)
class QueueEndsSummary:
    commit_log_min: int
    commit_log_end: int
    queue_file_size: int
    queues: dict[tuple[str, int], QueueEnds] = field(default_factory=dict)


def encode(summary: QueueEndsSummary) -> bytes:
    parts = [
        _HEADER.pack(
            MAGIC,
            summary.commit_log_min,
            summary.commit_log_end,
            summary.queue_file_size,
            len(summary.queues),
        )
    ]
    for (topic, queue_id), ends in summary.queues.items():
        name = topic.encode()
        parts.append(
            _QUEUE.pack(queue_id, ends.min_offset, ends.max_offset, ends.retention_mark, len(name))
        )
        parts.append(name)
    data = b"".join(parts)
    return data + _CRC.pack(zlib.crc32(data))


def decode(data: bytes) -> QueueEndsSummary:
    """Raises ValueError when ``data`` is not a whole, intact summary."""
    if len(data) < _HEADER.size + _CRC.size:
        raise ValueError(f"{len(data)} bytes is too short")
    body, (crc,) = data[: -_CRC.size], _CRC.unpack_from(data, len(data) - _CRC.size)
    if zlib.crc32(body) != crc:
        raise ValueError("its CRC does not match (torn or damaged)")
    magic, commit_log_min, commit_log_end, file_size, count = _HEADER.unpack_from(body)
    if magic != MAGIC:
        raise ValueError(f"unknown magic {magic!r}")
    summary = QueueEndsSummary(commit_log_min, commit_log_end, file_size)
    position = _HEADER.size
    for _ in range(count):
        queue_id, min_offset, max_offset, mark, length = _QUEUE.unpack_from(body, position)
        position += _QUEUE.size
        topic = body[position : position + length].decode()
        position += length
        summary.queues[(topic, queue_id)] = QueueEnds(min_offset, max_offset, mark)
    if position != len(body):
        raise ValueError(f"{len(body) - position} bytes left after {count} queues")
    return summary


def write(path: Path, summary: QueueEndsSummary) -> None:
    """Write ``path`` whole or not at all (a temporary file, synced, then renamed); the
    caller syncs the directory."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        file.write(encode(summary))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def take(path: Path) -> QueueEndsSummary | None:
    """Read and delete ``path``: a summary serves one start at most. None when there is
    none or it cannot be used (logged); the caller syncs the directory."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    finally:
        path.with_name(path.name + ".tmp").unlink(missing_ok=True)
    path.unlink()
    try:
        return decode(data)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        log.warning("ignoring %s (every consume queue is loaded instead): %s", path, exc)
        return None
