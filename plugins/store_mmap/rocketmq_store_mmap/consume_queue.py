"""ConsumeQueue: one topic/queue's index into the CommitLog, 20 bytes per message
(STORE.md §4): CommitLog offset, record size, tags code. Queue offset N is entry N."""

from __future__ import annotations

import struct
from pathlib import Path

from .mapped_file import MappedFile, MappedFileQueue, file_name
from .mapping import MappingBudget
from .queue_ends import NEVER

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size  # 20
_BLANK_SIZE = 0x7FFFFFFF
_BLANK_ENTRY = ENTRY.pack(0, _BLANK_SIZE, 0)  # a hole before the first real entry
# whole entries and whole pages: all that an idle queue's file holds, in one read
_SCAN_CHUNK = ENTRY_SIZE * 4096
RECOVERED_FILES = 3  # recovery checks the newest files only; the older ones are full (as Java)


class ConsumeQueue:
    __slots__ = (
        "append_context",
        "encoded_topic",
        "files",
        "min_offset",
        "next_offset",
        "queue_id",
        "spares",
        "topic",
    )

    def __init__(
        self,
        root: Path,
        topic: str,
        queue_id: int,
        file_size: int,
        budget: MappingBudget | None = None,
    ) -> None:
        if file_size % ENTRY_SIZE:
            raise ValueError(f"mappedFileSizeConsumeQueue {file_size} is not a multiple of 20")
        self.topic = topic
        self.encoded_topic = topic.encode()
        self.queue_id = queue_id
        # the queue offset the next record gets (the writer's; entries may lag in recovery)
        self.next_offset = 0
        self.files = MappedFileQueue(
            root / topic / str(queue_id),
            file_size,
            reserve=False,
            read_written_ahead=False,
            budget=budget,
        )
        self.min_offset = 0
        self.spares: list[MappedFile] = []  # created by reserve(), used as the queue rolls
        # the store's: the compiled append's fixed arguments for this queue, made once
        self.append_context: tuple | None = None

    @property
    def max_offset(self) -> int:
        """Entries so far: the next queue offset."""
        return self.files.max_offset // ENTRY_SIZE

    def load_and_recover(self, after_crash: bool = True) -> None:
        """List the files (mapped on first use); the queue ends at the first entry that
        is not valid. Reads what the newest files hold; after a crash, erases stale
        entries past the end (after a clean stop there are none: nothing is written)."""
        self.files.load()
        files = self.files.files
        end = self.files.min_offset
        for mapped in files[-RECOVERED_FILES:]:
            valid = _valid_length(mapped)
            end = mapped.start + valid
            if valid < mapped.size:
                break
        self.files.truncate_after(end, zero=after_crash)
        self.min_offset = self.files.min_offset // ENTRY_SIZE

    def append(self, queue_offset: int, phys: int, size: int, tags_code: int) -> None:
        """Add the entry for ``queue_offset``; one already there is left as it is."""
        files = self.files.files
        if files:
            mapped = files[-1]
            position = mapped.wrote
            buffer = mapped.buffer
            if (
                position + ENTRY_SIZE <= mapped.allocated
                and (mapped.start + position) // ENTRY_SIZE == queue_offset
                and buffer is not None
            ):
                # the common case, once per put: the next entry, room in the last file
                ENTRY.pack_into(buffer, position, phys, size, tags_code)
                mapped.wrote = position + ENTRY_SIZE
                return
        expected = self.max_offset
        if queue_offset < expected:
            return
        if queue_offset > 0 and not self.files.files:
            expected = self._start_at(queue_offset)
        while expected < queue_offset:  # a hole (queue offsets reset): keep offsets aligned
            self._write(_BLANK_ENTRY)
            expected += 1
        self._write(ENTRY.pack(phys, size, tags_code))

    def _start_at(self, queue_offset: int) -> int:
        """A queue whose first entry comes at ``queue_offset`` (a slave that started in the
        middle of its master's log): its first file is the one holding that offset, blank
        up to it, so offsets stay the master's. Returns the queue offset the file starts at."""
        position = queue_offset * ENTRY_SIZE
        start = position - position % self.files.file_size
        self.min_offset = queue_offset
        if start == 0:
            return 0  # the spares are made from 0 on
        for spare in self.spares:  # made for a queue starting at 0
            spare.remove()
        self.spares = [
            MappedFile(
                self.files.directory / file_name(start),
                start,
                self.files.file_size,
                reserve=False,
                budget=self.files.budget,
            )
        ]
        return start // ENTRY_SIZE

    def reserve(self, count: int) -> None:
        """Create now the files the next ``count`` entries need, so that a file that
        cannot be created (no descriptors, no mappings left) fails a put before its
        record is written. The only place queue files are created; the last file is
        mapped here too (the budget may have unmapped it). Raises FileCreationError."""
        files = self.files.files
        if files:
            last = files[-1]
            last.view()
            # blocks for the entries first: on a full disk a refusal, not a SIGBUS
            last.allocate_ahead(min(last.size, last.wrote + count * ENTRY_SIZE))
            if last.wrote + count * ENTRY_SIZE <= last.size:
                return  # the usual case: room in the last file
        room = files[-1].free // ENTRY_SIZE if files else 0
        per_file = self.files.file_size // ENTRY_SIZE
        needed = -(-(count - room) // per_file)
        while len(self.spares) < needed:
            start = self._next_file_start()
            self.spares.append(
                MappedFile(
                    self.files.directory / file_name(start),
                    start,
                    self.files.file_size,
                    reserve=False,
                    budget=self.files.budget,
                )
            )
        left = count - room
        for spare in self.spares[:needed]:
            spare.allocate(min(spare.size, left * ENTRY_SIZE))
            left -= per_file

    def _next_file_start(self) -> int:
        if self.spares:
            return self.spares[-1].end
        last = self.files.last
        return last.end if last is not None else 0

    def _write(self, entry: bytes) -> None:
        mapped = self.files.last
        if mapped is None or mapped.free < ENTRY_SIZE:
            self.reserve(1)  # recovery's writes come here unreserved
            mapped = self.spares.pop(0)
            self.files.append(mapped)
        position = mapped.wrote
        view = mapped.view()
        # blocks ahead: a slave's and recovery's entries all come this way, one at a time,
        # and a fallocate per page of entries was 4% of a slave's time
        mapped.allocate_ahead(position + ENTRY_SIZE)
        view[position : position + ENTRY_SIZE] = entry
        mapped.wrote = position + ENTRY_SIZE

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        mapped = self.files.find(queue_offset * ENTRY_SIZE)
        if mapped is None:
            return None
        position = queue_offset * ENTRY_SIZE - mapped.start
        if position + ENTRY_SIZE > mapped.wrote:
            return None
        buffer = mapped.buffer
        if buffer is None:  # one look, no mapping made for it
            return ENTRY.unpack(mapped.read(position, ENTRY_SIZE))
        return ENTRY.unpack_from(buffer, position)

    def entries(self, queue_offset: int, count: int) -> memoryview:
        """Up to ``count`` packed entries from ``queue_offset``, within one file. The
        caller releases the view before it yields: the budget may unmap the file at the
        start of the next operation."""
        mapped = self.files.find(queue_offset * ENTRY_SIZE)
        if mapped is None:
            return memoryview(b"")
        position = queue_offset * ENTRY_SIZE - mapped.start
        end = min(mapped.wrote, position + count * ENTRY_SIZE)
        return mapped.view()[position:end]

    def retention_mark(self) -> int:
        """The lowest CommitLog min offset at which ``delete_expired`` changes this queue:
        the record at its min offset falls below it, or every record of its oldest file
        (one file is never deleted). NEVER when neither can happen."""
        mark = NEVER
        if self.min_offset < self.max_offset:
            entry = self.entry(self.min_offset)
            mark = 0 if entry is None or entry[1] == _BLANK_SIZE else entry[0] + 1
        files = self.files.files
        if len(files) > 1:
            first = files[0]
            phys, size, _ = ENTRY.unpack(first.read(first.size - ENTRY_SIZE, ENTRY_SIZE))
            mark = min(mark, phys + size)
        return mark

    def dirty_files(self) -> list[MappedFile]:
        """Files with entries written since their last sync."""
        return [mapped for mapped in self.files.files if mapped.flushed < mapped.wrote]

    def truncate_from_phys(self, phys_end: int) -> None:
        """Drop entries that refer at or after ``phys_end`` (the CommitLog was cut there)."""
        offset = self.max_offset
        while offset > self.min_offset:
            entry = self.entry(offset - 1)
            if entry is None or entry[0] + entry[1] <= phys_end or entry[1] == 0x7FFFFFFF:
                break
            offset -= 1
        if offset != self.max_offset:
            self.files.truncate_after(offset * ENTRY_SIZE)

    def correct_min_offset(self, commit_log_min: int) -> None:
        """The first entry whose record is still in the CommitLog is the min offset."""
        offset = max(self.min_offset, self.files.min_offset // ENTRY_SIZE)
        while offset < self.max_offset:
            entry = self.entry(offset)
            if entry is not None and entry[0] >= commit_log_min and entry[1] != 0x7FFFFFFF:
                break
            offset += 1
        self.min_offset = offset

    def delete_expired(self, commit_log_min: int) -> int:
        """Delete whole files whose entries all refer below the CommitLog's min offset."""
        deleted = 0
        while len(self.files.files) > 1:
            first = self.files.files[0]
            last_entry = ENTRY.unpack(first.read(first.size - ENTRY_SIZE, ENTRY_SIZE))
            if last_entry[0] + last_entry[1] > commit_log_min:
                break
            self.files.delete_first().remove()  # small files: inline is fine
            deleted += 1
        self.correct_min_offset(commit_log_min)
        return deleted

    def close(self) -> None:
        self.files.close()
        for spare in self.spares:  # empty: a reload drops it (the queue ends before it)
            spare.close()
        self.spares.clear()


def _valid_length(mapped: MappedFile) -> int:
    """Bytes of valid entries at the start of ``mapped``: up to the first entry that is
    not one (never written, or torn)."""
    valid = 0
    for chunk in mapped.chunks(_SCAN_CHUNK):
        for phys, size, _code in ENTRY.iter_unpack(chunk):
            if phys < 0 or size <= 0:
                return valid
            valid += ENTRY_SIZE
    return valid
