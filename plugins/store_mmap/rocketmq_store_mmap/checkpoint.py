"""The checkpoint file (STORE.md §6) and how far recovery may trust derived files.

RocketMQ's fields stay where Java puts them (three store timestamps at 0, 8, 16);
rocketmq-py adds, at byte 40, the CommitLog offset below which every consume-queue
and index entry is on disk: recovery re-dispatches from there.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

FILE_SIZE = 4096
_FIELDS = struct.Struct(">qqqqqq")


@dataclass
class Checkpoint:
    path: Path
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    dispatched_offset: int = 0  # ours: consume queues and index are durable below this

    def load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if len(data) < _FIELDS.size:
            return  # a torn checkpoint: recover from the start of the CommitLog
        physic, logics, index, _master, _confirm, dispatched = _FIELDS.unpack_from(data)
        self.physic_msg_timestamp = physic
        self.logics_msg_timestamp = logics
        self.index_msg_timestamp = index
        self.dispatched_offset = max(0, dispatched)

    def save(self) -> None:
        """Blocking: write and fdatasync the page in place (one 4 KiB page, never torn)."""
        page = bytearray(FILE_SIZE)
        _FIELDS.pack_into(
            page,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            0,
            0,
            self.dispatched_offset,
        )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
