"""The CommitLog: every record of every topic, appended to mapped files (STORE.md §3).

A record never spans files: when one does not fit (its size plus 8 bytes exceed what
is left), an 8-byte blank record ends the file and the record goes into the next.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from rocketmq_core.protocol.message import (
    BLANK_MAGIC,
    BLANK_SIZE,
    BORNHOST_V6,
    MAGIC_V1,
    MAGIC_V2,
    MAX_V1_TOPIC_LENGTH,
    PHYSICAL_OFFSET_AT,
    STOREHOST_V6,
    RecordError,
    body_crc,
    host_is_v6,
    record_size,
    record_store_time,
    with_host_flags,
    write_blank,
    write_record,
)
from rocketmq_core.store.api import DispatchRequest, MessageToStore

from .mapped_file import MappedFile, MappedFileQueue
from .record_requests import TagsCodeRule, read_request

log = logging.getLogger("rocketmq.store.mmap")

_SIZE_MAGIC = struct.Struct(">ii")
_LONG = struct.Struct(">q")
# the writer's own pre-touch when the background one fell behind (MappedFile.fill_ahead):
# small, since the event loop waits meanwhile (~70 us filled, ~0.3 ms faulted in here)
WRITER_TOUCH_STEP = 256 << 10
# the paths that look after writing (a batch, the compiled single put) take their step
# once this close to the touched end, so the next put's pages are ready before it
WRITER_TOUCH_LEAD = 64 << 10
# the writer lets go of the pages further behind it than this (MADV_DONTNEED), and a
# flush of those of a full file: consumers at the tail read mapped pages, the process's
# RSS stays near this plus the pre-touched part (~0.3 s of sends at 50k msg/s of 1 KiB;
# a consumer further behind maps the pages again from the page cache: a minor fault per
# 64 KiB, fault_around_bytes, or per 2 MiB folio)
RESIDENT_BEHIND = 16 << 20
_HOST_V6_FLAGS = BORNHOST_V6 | STOREHOST_V6
_V1_V4_OVERHEAD = record_size(0, 0, 0, False, False)  # a V1 record with IPv4 hosts


class CommitLog:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        store_host: bytes,
        huge_folios: bool = False,
        writer_fills: bool = False,
        page_cache_window: int = 0,
    ) -> None:
        # 2 MiB folios (commitLogHugeFolios) fault in ~2x cheaper a page from memory the
        # kernel has used before, ~4x dearer from memory a VM's balloon gave back to its
        # host (docs/perf.md); a flush writes back every dirty folio whole: a group commit
        # (SYNC_FLUSH) after a 1 KiB put wrote 2 MiB (fdatasync 2.3 ms instead of 0.13)
        self.files = MappedFileQueue(
            directory,
            file_size,
            reserve=True,
            read_written_ahead=True,
            huge_folios=huge_folios,
            resident_behind=RESIDENT_BEHIND,
            writer_fills=writer_fills,
        )
        # flushed bytes further behind the flush than this leave the page cache (0: the
        # kernel decides, as for Java's broker): commitLogPageCacheWindow
        self.page_cache_window = page_cache_window
        self.store_host = store_host
        self.store_v6 = host_is_v6(store_host)
        self.next_file: MappedFile | None = None  # made ahead of need, off the hot path

    def load(self) -> None:
        self.files.load()

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    # --- writing ---------------------------------------------------------------------------

    def append(
        self, message: MessageToStore, topic: bytes, queue_offset: int, store_time: int
    ) -> tuple[int, int, int]:
        """Write one record; returns (commit-log offset, size, stored sysFlag).

        Raises FileCreationError (from creating the next file) with nothing written.
        """
        size, sys_flag = self.layout(message, topic)
        mapped = self._room_for(size)
        position = mapped.wrote
        if position + size > mapped.touched:
            # the background pre-touch fell behind: a first touch costs ~2 us per page
            mapped.fill_ahead(WRITER_TOUCH_STEP)
        phys = mapped.start + position
        # positional: this is the hottest call of a put (keywords cost ~1 us here)
        write_record(
            mapped.buffer,
            position,
            size,
            message.body,
            body_crc(message.body),
            topic,
            message.properties,
            message.queue_id,
            message.flag,
            queue_offset,
            phys,
            sys_flag,
            message.born_timestamp,
            message.born_host,
            store_time,
            self.store_host,
            message.reconsume_times,
            message.prepared_transaction_offset,
        )
        mapped.wrote = position + size
        return phys, size, sys_flag

    def layout(self, message: MessageToStore, topic: bytes) -> tuple[int, int]:
        """(record size, stored sysFlag) of ``message``: the sysFlag carries the IPv6 bits
        of its hosts, which choose the layout."""
        sys_flag = message.sys_flag
        if (
            len(message.born_host) == 8
            and not self.store_v6
            and not sys_flag & _HOST_V6_FLAGS
            and len(topic) <= MAX_V1_TOPIC_LENGTH
        ):  # the usual record
            size = _V1_V4_OVERHEAD + len(message.body) + len(topic) + len(message.properties)
            return size, sys_flag
        sys_flag = with_host_flags(sys_flag, message.born_host, self.store_host)
        size = record_size(
            len(message.body),
            len(topic),
            len(message.properties),
            bool(sys_flag & BORNHOST_V6),
            self.store_v6,
        )
        return size, sys_flag

    def room_for_batch(self, messages: Sequence[MessageToStore], topic: bytes) -> None:
        """Make sure the whole batch fits in the current file (a batch never spans files)."""
        self._room_for(sum(self.layout(message, topic)[0] for message in messages))

    def _room_for(self, size: int) -> MappedFile:
        mapped = self.files.last
        if mapped is None:
            return self._roll(0)
        if size + BLANK_SIZE > mapped.free:
            if size + BLANK_SIZE > self.files.file_size:
                raise ValueError(
                    f"a {size}-byte write cannot fit a {self.files.file_size}-byte CommitLog"
                    " file; raise mappedFileSizeCommitLog or lower maxMessageSize"
                )
            new = self._roll(mapped.end)
            if mapped.free:  # none left: recovery found the file closed by its blank
                write_blank(mapped.buffer, mapped.wrote, mapped.free)
            mapped.wrote = mapped.size
            return new
        return mapped

    def _roll(self, start: int) -> MappedFile:
        left = self.files.last
        ready = self.next_file
        if ready is not None and ready.start == start:
            self.next_file = None
            self.files.append(ready)
        else:
            ready = self.files.create(start)
        if left is not None:
            # the writer is done with it: its last RESIDENT_BEHIND (and what was touched
            # ahead) need not stay mapped until the next flush lets go of them (~30 MB
            # more resident at every roll under fast sends); never waits for the toucher
            left.release_before(left.size, wait=False)
        return ready

    def next_file_start(self) -> int:
        last = self.files.last
        return last.end if last is not None else 0

    def create_file(self, start: int) -> MappedFile:
        """Blocking: create and map a CommitLog file (call from a worker thread)."""
        return self.files.new_file(start)

    def offer_next_file(self, mapped: MappedFile) -> None:
        """Keep ``mapped`` for the next roll, if it still is the next file."""
        if self.next_file is None and mapped.start == self.next_file_start():
            self.next_file = mapped
        elif mapped is not self.next_file:
            mapped.close()
            # the writer may have rolled into this very file meanwhile: then it stays
            in_use = self.files.find(mapped.start) is not None or (
                self.next_file is not None and self.next_file.start == mapped.start
            )
            if not in_use:
                mapped.path.unlink(missing_ok=True)

    def writable_file(self, first_start: int) -> MappedFile:
        """The file the next bytes go to: the last one, the next one when it is full, or
        for an empty log a first one at ``first_start`` (a file boundary). Raises
        FileCreationError when a file cannot be made."""
        last = self.files.last
        if last is None:
            return self._roll(first_start)
        if not last.free:
            return self._roll(last.end)
        return last

    # --- reading ---------------------------------------------------------------------------

    def read_raw(self, offset: int, max_bytes: int, end: int) -> bytes:
        """At most ``max_bytes`` bytes from ``offset``, below ``end`` and the written end
        of the one file holding ``offset``; b"" when there are none."""
        mapped = self.files.find(offset)
        if mapped is None or mapped.buffer is None:
            return b""
        stop = min(mapped.start + mapped.wrote, end, offset + max_bytes)
        if stop <= offset:
            return b""
        return bytes(mapped.buffer[offset - mapped.start : stop - mapped.start])

    def record_at(self, phys: int) -> memoryview | None:
        """The record starting exactly at ``phys`` (checked by its own offset field)."""
        mapped = self.files.find(phys)
        if mapped is None:
            return None
        position = phys - mapped.start
        if position + PHYSICAL_OFFSET_AT + 8 > mapped.wrote:
            return None
        size, magic = _SIZE_MAGIC.unpack_from(mapped.buffer, position)
        if magic not in (MAGIC_V1, MAGIC_V2) or position + size > mapped.wrote:
            return None
        (own_offset,) = _LONG.unpack_from(mapped.buffer, position + PHYSICAL_OFFSET_AT)
        if own_offset != phys:
            return None
        return mapped.buffer[position : position + size]

    def store_time_at(self, phys: int) -> int:
        record = self.record_at(phys)
        return record_store_time(record) if record is not None else -1

    # --- recovery --------------------------------------------------------------------------

    def scan(
        self, start: int, check_crc: bool, rules: Sequence[TagsCodeRule] = ()
    ) -> Iterator[tuple[int, DispatchRequest]]:
        """Valid records from ``start`` on, as their dispatch requests, stopping at the
        first invalid one.

        Sets ``self.scan_end`` to the offset after the last valid record (or blank).
        """
        last = self.files.last
        # a checkpoint past every file (files lost) cannot vouch for anything
        position = max(start, self.files.min_offset) if last is not None else 0
        if last is not None:
            position = min(position, last.end)
        self.scan_end = position
        while True:
            mapped = self.files.find(position)
            if mapped is None:
                return
            relative = position - mapped.start
            if relative + BLANK_SIZE > mapped.size:
                return
            size, magic = _SIZE_MAGIC.unpack_from(mapped.buffer, relative)
            if magic == BLANK_MAGIC:
                if size != mapped.size - relative:
                    return  # a blank record must close its file exactly
                position = mapped.end
                self.scan_end = position
                continue
            try:
                request = read_request(mapped.buffer, relative, check_crc, rules)
            except RecordError as exc:
                if size != 0 or magic != 0:
                    log.warning("CommitLog ends at %d: %s", position, exc)
                return
            if request.commit_log_offset != position:
                log.warning("CommitLog ends at %d: a record that belongs elsewhere", position)
                return
            yield position, request
            position += size
            self.scan_end = position

    def truncate_after(self, offset: int, zero: bool) -> None:
        self.files.truncate_after(offset, zero)
        if self.next_file is not None:
            self.next_file.close()
            self.next_file.path.unlink(missing_ok=True)
            self.next_file = None

    # --- durability and retention ----------------------------------------------------------

    def sync(self, upto: int) -> None:
        """Blocking: fdatasync every file holding bytes below ``upto`` not yet flushed; then
        let go of the pages more than RESIDENT_BEHIND behind it, and with a page cache
        window drop the page cache further behind it than that."""
        keep_from = upto - self.files.resident_behind
        files = list(self.files.files)
        for mapped in files:
            if mapped.start >= upto:
                break
            if mapped.flushed < mapped.wrote:
                mapped.sync()
            if mapped.start < keep_from:
                mapped.release_before(keep_from - mapped.start)
        if self.page_cache_window:  # once all is durable: no fdatasync waits for it
            cached_from = upto - self.page_cache_window
            for mapped in files:
                if mapped.start >= cached_from:
                    break
                mapped.drop_cached_before(cached_from - mapped.start)

    def close(self) -> None:
        self.files.close()
        if self.next_file is not None:
            self.next_file.close()
            self.next_file = None
