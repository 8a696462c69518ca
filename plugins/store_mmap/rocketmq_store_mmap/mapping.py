"""Mappings of store files that keep no descriptor open, and the budget that bounds how
many of them are mapped at once.

CPython's ``mmap.mmap`` keeps a dup() of the file's descriptor for as long as the
mapping lives (3.13 adds ``trackfd=False``): one open file per consume-queue file, and
a broker with 20,000 queues out of descriptors. A ``FileMapping`` maps through libc and
the caller closes the descriptor at once; the kernel keeps the file referenced by the
mapping itself. Each mapping is still one entry against ``vm.max_map_count``, so the
consume queues' files share a ``MappingBudget``: the least recently used go unmapped
(their bytes stay in the file and the page cache) and are mapped again on next use.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
import os
from collections import OrderedDict
from typing import Protocol

log = logging.getLogger("rocketmq.store.mmap")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_mmap = _libc.mmap
_mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_mmap.restype = ctypes.c_void_p
_munmap = _libc.munmap
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_munmap.restype = ctypes.c_int
_MAP_FAILED = ctypes.c_void_p(-1).value

MAX_MAP_COUNT_PATH = "/proc/sys/vm/max_map_count"
# mappings left for everything else: the interpreter, libraries, CommitLog and index files
MAPPINGS_KEPT_FREE = 4096


class FileMapping:
    """``size`` bytes of a file mapped shared, read-write; holds no descriptor.

    ``buffer`` is the only view handed out: after ``close()`` it is released, so a
    stale use raises ValueError instead of touching unmapped memory. Slices of it must
    not outlive the call that took them (copy the bytes out instead).
    """

    __slots__ = ("address", "buffer", "size")

    def __init__(self, fd: int, size: int) -> None:
        address = _mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))
        self.address = address
        self.size = size
        self.buffer = memoryview((ctypes.c_ubyte * size).from_address(address)).cast("B")

    def close(self) -> None:
        if self.address:
            self.buffer.release()
            _munmap(self.address, self.size)
            self.address = 0


class Evictable(Protocol):
    used: bool  # set by each use; a used file gets one more round before it is unmapped

    def unmap(self) -> None: ...


class MappingBudget:
    """At most about ``limit`` files mapped: trimmed between operations, never during one
    (an operation maps the few files it needs, then the least recently used go)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._mapped: OrderedDict[Evictable, None] = OrderedDict()
        self.unmapped = 0  # evictions so far

    def __len__(self) -> int:
        return len(self._mapped)

    @property
    def over(self) -> bool:
        return len(self._mapped) > self.limit

    def admit(self, mapped: Evictable) -> None:
        mapped.used = True
        self._mapped[mapped] = None

    def forget(self, mapped: Evictable) -> None:
        self._mapped.pop(mapped, None)

    def trim(self) -> None:
        """Unmap files, least recently used first, until at most ``limit`` are mapped."""
        mapped = self._mapped
        while len(mapped) > self.limit:
            victim = next(iter(mapped))
            if victim.used:  # second chance (a CLOCK): no reordering on every use
                victim.used = False
                mapped.move_to_end(victim)
                continue
            del mapped[victim]
            victim.unmap()
            self.unmapped += 1


def mapping_limit(wanted: int) -> int:
    """``wanted``, or fewer when ``vm.max_map_count`` leaves less room: half of what the
    kernel allows after MAPPINGS_KEPT_FREE, so other mappings never run out."""
    try:
        with open(MAX_MAP_COUNT_PATH) as limit_file:
            kernel_limit = int(limit_file.read())
    except (OSError, ValueError):
        return wanted
    room = max(64, (kernel_limit - MAPPINGS_KEPT_FREE) // 2)
    if wanted > room:
        log.warning(
            "maxMappedConsumeQueueFiles %d lowered to %d: vm.max_map_count is %d",
            wanted,
            room,
            kernel_limit,
        )
    return min(wanted, room)
