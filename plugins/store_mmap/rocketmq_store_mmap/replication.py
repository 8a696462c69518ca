"""A slave's CommitLog: its master's bytes written where they came from, and each record
they complete dispatched as the master's was (HA.md §4).

Frames cut records anywhere, so the log often ends in an incomplete record. Its first
bytes (size and magic, at most 8) are kept here and zero on disk until the record is
whole: after a kill, recovery sees no record there and cuts the log at its start, never
reading a torn record as a whole one. Records are checked before anything is written
(magic, size, within one file), so bytes that are not records leave the store unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NoReturn

from rocketmq_core.errors import StoreError
from rocketmq_core.protocol.message import (
    BLANK_MAGIC,
    FIXED_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    RecordError,
)
from rocketmq_core.store.api import DispatchRequest, ReplicationError

from .commitlog import CommitLog
from .mapped_file import MappedFile
from .record_requests import read_request

_SIZE_MAGIC = struct.Struct(">ii")
_HEAD = _SIZE_MAGIC.size  # 8: what an incomplete record keeps off the disk
_SMALLEST_RECORD = FIXED_SIZE + 16  # two IPv4 hosts, nothing else


# the request of the record at a position of a mapped file: record_requests.read_request
RecordReader = Callable[[memoryview, int], DispatchRequest]
# ``dispatch_run(mapped, offsets, start, progress)``: the records at ``offsets[start:]`` of
# ``mapped`` dispatched as ``dispatch`` would, while each is the usual case; how many it
# did (the next one is ``dispatch``'s). An exception from a dispatcher is about the record
# ``offsets[progress[0]]``. The store's compiled dispatch (_append.replica_dispatch).
RunDispatcher = Callable[[MappedFile, list[int], int, list[int]], int]


class ReplicaWriter:
    """Appends replicated bytes to ``commitlog`` and hands the request of each record
    they complete (read by ``read``) to ``dispatch``."""

    def __init__(
        self,
        commitlog: CommitLog,
        dispatch: Callable[[DispatchRequest], None],
        read: RecordReader = read_request,
        dispatch_run: RunDispatcher | None = None,
        *,
        cut: Callable[[int], None],
    ) -> None:
        self.commitlog = commitlog
        self.cut = cut  # ends the log at an offset: the store's, which tells its flusher too
        self.dispatch = dispatch
        self.read = read
        self.dispatch_run = dispatch_run
        self._progress = [0]
        self.pending: int | None = None  # where the incomplete last record starts
        self.hidden = b""  # its first bytes, zero on disk until it is whole

    @property
    def whole_end(self) -> int:
        """The end of the last whole record: what a restart keeps."""
        return self.pending if self.pending is not None else self.commitlog.max_offset

    def append(self, offset: int, data: bytes) -> None:
        commitlog = self.commitlog
        file_size = commitlog.files.file_size
        last = commitlog.files.last
        end = commitlog.max_offset
        if last is None:
            if offset % file_size:
                raise ReplicationError(
                    f"an empty CommitLog starts at a file boundary (a multiple of {file_size}),"
                    f" not at {offset}"
                )
            file_start, room = offset, file_size
        elif offset != end:
            raise ReplicationError(
                f"replicated bytes for CommitLog offset {offset}, but the CommitLog ends at"
                f" {end}: the master must send from {end}"
            )
        elif last.free:
            file_start, room = last.start, last.free
        else:
            file_start, room = last.end, file_size
        if not data:
            return  # the master's heartbeat
        if len(data) > room:
            raise ReplicationError(
                f"{len(data)} replicated bytes at CommitLog offset {offset} cross the end of"
                f" the file at {file_start + file_size}; the master's mappedFileSizeCommitLog"
                f" must be {file_size}, as here"
            )
        new_end = offset + len(data)
        records, pending = self._walk(offset, data, file_start, file_start + file_size)
        mapped = commitlog.writable_file(file_start)
        buffer = mapped.buffer
        assert buffer is not None  # a CommitLog file is mapped until it is closed
        # the heads of incomplete records never show on disk, even for an instant
        heads = {start for start in (self.pending, pending) if start is not None}
        cursor, base, source = offset, mapped.start, memoryview(data)
        for start in sorted(heads):
            low, high = max(start, cursor), min(start + _HEAD, new_end)
            if low >= high:
                continue
            buffer[cursor - base : low - base] = source[cursor - offset : low - offset]
            buffer[low - base : high - base] = bytes(high - low)
            cursor = high
        buffer[cursor - base : new_end - base] = source[cursor - offset :]
        mapped.wrote = new_end - base
        completed = self.pending if self.pending != pending else None
        hidden = self._head(pending, offset, data) if pending is not None else b""
        if completed is not None:  # whole now: its head shows, and it is a record again
            head = self._head(completed, offset, data)
            buffer[completed - base : completed - base + _HEAD] = head
        self.pending, self.hidden = pending, hidden
        # all in this file (records never cross one's end); the usual ones compiled
        dispatch_at, dispatch_run = self._dispatch_at, self.dispatch_run
        done = 0
        while done < len(records):
            if dispatch_run is not None:
                done += self._dispatch_run(dispatch_run, mapped, records, done)
                if done == len(records):
                    break
            dispatch_at(records[done], mapped)
            done += 1

    def _head(self, start: int, offset: int, data: bytes) -> bytes:
        """The first bytes (at most 8) of the record at ``start``, from what is hidden
        and ``data`` (at ``offset``); before the call's state is updated."""
        if start == self.pending:
            return self.hidden + data[: _HEAD - len(self.hidden)]
        return data[start - offset : start - offset + _HEAD]

    def _walk(
        self, offset: int, data: bytes, file_start: int, file_end: int
    ) -> tuple[list[int], int | None]:
        """Before anything is written: where the records ``data`` completes start, and
        where the incomplete one it leaves starts (None: it ends on a record boundary).
        Raises ReplicationError on bytes that cannot be a record's start."""
        new_end = offset + len(data)
        position = self.pending if self.pending is not None else offset
        records: list[int] = []
        while position < new_end:
            head = self._head(position, offset, data)
            if len(head) < _HEAD:
                return records, position
            size, magic = _SIZE_MAGIC.unpack(head)
            if magic == BLANK_MAGIC:  # the file's end: the rest of it is filler
                if size != file_end - position:
                    self._refuse(position, f"a blank record of {size} bytes")
                if new_end < file_end:
                    return records, position
                return records, None
            if magic not in (MAGIC_V1, MAGIC_V2):
                self._refuse(position, f"magic code {magic & 0xFFFFFFFF:#x}")
            if size < _SMALLEST_RECORD or position + size > file_end:
                self._refuse(position, f"a record of {size} bytes")
            if position + size > new_end:
                return records, position
            records.append(position)
            position += size
        return records, None

    def _dispatch_at(self, position: int, mapped: MappedFile) -> None:
        assert mapped.buffer is not None and mapped.start <= position < mapped.end
        try:
            request = self.read(mapped.buffer, position - mapped.start)
            if request.commit_log_offset != position:
                raise RecordError(f"it says it belongs at {request.commit_log_offset}")
            self.dispatch(request)
        except (RecordError, StoreError, OSError) as exc:
            self._refuse_from(position, exc)

    def _dispatch_run(
        self, dispatch_run: RunDispatcher, mapped: MappedFile, records: list[int], start: int
    ) -> int:
        progress = self._progress
        progress[0] = start
        try:
            return dispatch_run(mapped, records, start, progress)
        except (RecordError, StoreError, OSError) as exc:  # a dispatcher's, as _dispatch_at
            self._refuse_from(records[progress[0]], exc)

    def _refuse_from(self, position: int, exc: Exception) -> NoReturn:
        """The record at ``position`` could not be dispatched: the log keeps the whole
        records before it (the master sends the rest again)."""
        self.cut(position)
        self.pending, self.hidden = None, b""
        raise ReplicationError(
            f"the replicated record at CommitLog offset {position} cannot be stored: {exc};"
            f" the CommitLog now ends at {position}"
        ) from exc

    def _refuse(self, position: int, what: str) -> None:
        raise ReplicationError(
            f"replicated bytes at CommitLog offset {position} hold {what}, not a record;"
            " nothing of them was written"
        )
