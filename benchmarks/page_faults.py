"""What a new page of a CommitLog-like file costs, by how it is written.

The mmap store writes records into a mapping of a file whose blocks it reserved
(posix_fallocate): each new 4 KiB page is faulted in (zero-filled) before the record is
copied into it. What that costs depends on
the folio size the mapping faults in and, on a VM, on which memory the kernel hands out:
a balloon with free page reporting gives free blocks of 2 MiB and more back to the host
a few seconds after they are freed, and the first touch of such memory costs the host's
fault on top of ours (docs/perf.md, "Page cache").

Each round writes ``--mib`` MiB of ``--record``-byte records into a new file,
fallocated as the store's CommitLog files are, on the file system of ``--scratch``,
after ``--pause`` seconds in which the previous round's freed pages may be reported,
then deletes it:

* pwrite: one ``os.pwrite`` per 64 KiB of records (the page cache gets the data directly);
* mmap 4 KiB: memcpy into a MAP_SHARED mapping advised MADV_RANDOM (the store's default);
* mmap 2 MiB: the same, also MADV_HUGEPAGE (``commitLogHugeFolios=true``);
* mmap 2 MiB, no pause: as above, right after a round freed its pages.

The writes go 64 KiB at a time (16 pages a Python call): the figure is the kernel's, per
page. Pinned to ``--core``. Prints a table, writes JSON.

    python benchmarks/page_faults.py
    python benchmarks/page_faults.py --rounds 5 --pause 10 --mib 256
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import mmap
import os
import statistics
import tempfile
import time
from pathlib import Path

from loadgen import machine, write_results

MADV_RANDOM, MADV_HUGEPAGE = 1, 14  # Linux's values
PAGE = 4096
STEP = 64 * 1024

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def records(step: int, record: int) -> bytes:
    """``step`` bytes of back-to-back records of ``record`` bytes (a record may straddle)."""
    one = (b"r" * (record - 1)) + b"\n"
    return (one * (step // record + 1))[:step]


def write_through_pwrite(path: Path, size: int, chunk: bytes) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)  # as the store's CommitLog files (reserve=True)
        for offset in range(0, size, len(chunk)):
            os.pwrite(fd, chunk, offset)
    finally:
        os.close(fd)


def write_through_mapping(path: Path, size: int, chunk: bytes, huge: bool) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    try:
        view = memoryview(mapping)
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
        _libc.madvise(address, size, MADV_RANDOM)
        if huge and _libc.madvise(address, size, MADV_HUGEPAGE) != 0:
            raise SystemExit("MADV_HUGEPAGE refused: a kernel without transparent huge pages")
        for offset in range(0, size, len(chunk)):
            view[offset : offset + len(chunk)] = chunk
        view.release()
    finally:
        mapping.close()


MODES = {
    "pwrite": (lambda path, size, chunk: write_through_pwrite(path, size, chunk), True),
    "mmap 4 KiB": (lambda path, size, chunk: write_through_mapping(path, size, chunk, False), True),
    "mmap 2 MiB": (lambda path, size, chunk: write_through_mapping(path, size, chunk, True), True),
    "mmap 2 MiB, no pause": (
        lambda path, size, chunk: write_through_mapping(path, size, chunk, True),
        False,
    ),
}


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512, help="written per round")
    parser.add_argument("--record", type=int, default=1200, help="bytes a record")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=8.0, help="seconds before a round")
    parser.add_argument(
        "--core", type=int, default=1 if (os.cpu_count() or 1) > 1 else -1, help="-1: don't pin"
    )
    parser.add_argument("--scratch", default=None, help="a directory on the store's disk")
    parser.add_argument("--output", default="benchmarks/results/page_faults.json")
    args = parser.parse_args()
    if args.core >= 0:
        os.sched_setaffinity(0, {args.core})
    size = args.mib << 20
    chunk = records(STEP, args.record)
    measured: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(dir=args.scratch, prefix="page-faults-") as scratch:
        path = Path(scratch) / "file"
        for round_number in range(1, args.rounds + 1):
            for mode, (write, pause) in MODES.items():
                if pause:
                    time.sleep(args.pause)
                started = cpu_seconds()
                write(path, size, chunk)
                spent = cpu_seconds() - started
                path.unlink()
                us_per_page = spent * 1e6 / (size // PAGE)
                measured[mode].append(us_per_page)
                print(f"round {round_number} {mode}: {us_per_page:.2f} us a page", flush=True)
    results = []
    print(
        f"\n{args.mib} MiB of {args.record}-byte records a round, {args.rounds} rounds,"
        f" {args.pause:g} s apart; CPU time per 4 KiB page (median, range)"
    )
    for mode, values in measured.items():
        results.append(
            {"mode": mode, "us_per_page": values, "median": round(statistics.median(values), 2)}
        )
        print(f"{mode:<22} {statistics.median(values):6.2f}  ({min(values):.2f}-{max(values):.2f})")
    setup = {
        **machine(),
        "mib": args.mib,
        "record": args.record,
        "rounds": args.rounds,
        "pause_s": args.pause,
        "core": args.core,
    }
    write_results(args.output, setup, results)


if __name__ == "__main__":
    main()
