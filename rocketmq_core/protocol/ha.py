"""The HA port's two byte streams (HA.md §2), sans-IO.

slave -> master: a run of 8-byte big-endian int64 values, each the slave's CommitLog end.
master -> slave: frames of a 12-byte header (int64 offset, int32 size) and ``size`` raw
CommitLog bytes; a frame with no body is the master's heartbeat.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import RemoteProtocolError

REPORT_SIZE = 8
HEADER_SIZE = 12
DEFAULT_TRANSFER_BATCH = 32768
# A Java slave reads into a 4 MiB buffer: a larger frame never completes (HA.md §10.5).
MAX_TRANSFER_BODY = 4 * 1024 * 1024 - HEADER_SIZE

_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")


def encode_offset_report(offset: int) -> bytes:
    """The slave's report of its CommitLog end (the ack a master counts)."""
    return _REPORT.pack(offset)


class OffsetReportReader:
    """Reads the slave -> master stream; only the newest whole value matters."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> int | None:
        """The last whole value completed by ``data``, or None when none completed."""
        buffered = self._partial + data
        whole = len(buffered) - len(buffered) % REPORT_SIZE
        self._partial = buffered[whole:]
        if whole == 0:
            return None
        value: int = _REPORT.unpack_from(buffered, whole - REPORT_SIZE)[0]
        return value


def encode_transfer_header(offset: int, size: int) -> bytes:
    """The header of a master -> slave frame: where the body starts and how long it is."""
    return _HEADER.pack(offset, size)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One master -> slave frame; an empty body is a heartbeat carrying the next offset."""

    offset: int
    body: bytes


class TransferReader:
    """Reads the master -> slave stream into whole frames; partial frames wait."""

    __slots__ = ("_buffer", "_max_body")

    def __init__(self, max_body: int = MAX_TRANSFER_BODY) -> None:
        self._buffer = bytearray()
        self._max_body = max_body

    def feed(self, data: bytes) -> list[Transfer]:
        """Every frame completed by ``data``, in order.

        Raises RemoteProtocolError on a negative size or one above the limit: the
        stream cannot be trusted past such a header.
        """
        buffer = self._buffer
        buffer += data
        transfers: list[Transfer] = []
        start = 0
        while len(buffer) - start >= HEADER_SIZE:
            offset, size = _HEADER.unpack_from(buffer, start)
            if size < 0 or size > self._max_body:
                raise RemoteProtocolError(
                    f"HA transfer header at offset {offset} has body size {size}; "
                    f"a master sends 0..{self._max_body} bytes per frame"
                )
            end = start + HEADER_SIZE + size
            if len(buffer) < end:
                break
            transfers.append(Transfer(offset, bytes(buffer[start + HEADER_SIZE : end])))
            start = end
        if start:
            del buffer[:start]
        return transfers
