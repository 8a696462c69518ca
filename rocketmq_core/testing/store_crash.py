"""Crash tests for persistent stores: kill a writer with SIGKILL, reopen, check what survived.

A child process opens the store and puts as fast as it can from several tasks over
several topics and queues (single puts and batches, bodies of varied sizes). Before each
put it logs an *attempt* line with the body digest, after each PUT_OK an *ack* line with
where the store put the message. The parent kills it at a random moment, opens the store
itself and checks:

- every acknowledged message is at its acknowledged queue offset and CommitLog offset,
  byte for byte (through ``get`` and through ``message_at``), and findable by its key;
- each queue's offsets are gapless from min to max, every record decodes with its body
  CRC, and a record nobody acknowledged is one the child attempted (nothing invented,
  nothing duplicated);
- consume queues agree with the CommitLog: ``message_at(record's own offset)`` returns
  the bytes ``get`` returned;
- what an earlier cycle saw after its clean close is still there.

Then it closes the store and the next cycle puts into the same directory. A store plugin
uses it as ``run_crash_cycles("mmap", tmp_path / "store", "sync", cycles=20, seed=1)``.
The child alone::

    python -m rocketmq_core.testing.store_crash --store mmap --root DIR --flush sync \\
        --ack-file PATH [--seed N] [--tasks 8] [--config JSON]

Ack-file lines, each ending with the CRC32 of what precedes it (a torn or corrupt line
is ignored, and only the last line may be torn)::

    T <topic> <queue id> <digest> <crc>                                   attempt
    A <topic> <queue id> <queue offset> <commit-log offset> <digest> <crc>  acknowledged
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import anyio

from ..errors import RocketMQError
from ..protocol.message import (
    RecordError,
    decode_offset_msg_id,
    decode_record,
    encode_properties,
)
from ..store.api import MessageStore, MessageToStore, StoreConfig

READY = b"running\n"
TOPICS = 3
QUEUES = 4
# (weight, smallest, largest body): mostly small, some pages long, a few large records
BODY_SIZES = ((700, 24, 256), (250, 256, 2048), (45, 2048, 8192), (5, 16384, 65536))
BATCH_RATIO = 0.2  # share of puts that are put_batch
BATCH_SIZES = (2, 16)
# small files so that every cycle rolls CommitLog, consume-queue and index files; no
# retention or disk-full refusal while the test runs
CRASH_CONFIG: dict[str, Any] = {
    "commit_log_file_size": 256 * 1024,
    "consume_queue_file_size": 20 * 1000,
    "max_hash_slot_num": 5000,
    "max_index_num": 20000,
    "disk_max_used_space_ratio": 100,
    "disk_space_clean_forcibly_ratio": 100,
    "disk_space_warning_level_ratio": 100,
}


class CrashCheckError(RocketMQError, AssertionError):
    """What the store holds after a crash contradicts what the child was told."""


def digest(body: bytes) -> str:
    """The body's fingerprint; also the message's UNIQ_KEY (32 hex digits like a real one)."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def topic_name(number: int) -> str:
    return f"CrashTopic{number}"


def _line(*fields: object) -> bytes:
    payload = " ".join(str(f) for f in fields)
    return f"{payload} {zlib.crc32(payload.encode()):08x}\n".encode()


# --- the child ---------------------------------------------------------------------------


class _Putter:
    """Puts from ``tasks`` tasks until killed; logs attempts and acks in the ack file."""

    def __init__(self, store: MessageStore, ack_fd: int, seed: int) -> None:
        self.store = store
        self.ack_fd = ack_fd
        self.seed = seed
        self.counter = 0
        self.rng = random.Random(seed)
        self._ranges = [(low, high) for _, low, high in BODY_SIZES]
        self._weights = [weight for weight, _, _ in BODY_SIZES]

    def _body(self) -> bytes:
        self.counter += 1
        ((low, high),) = self.rng.choices(self._ranges, self._weights)
        size = self.rng.randint(low, high)
        head = f"{self.seed}:{self.counter}:".encode() + self.rng.randbytes(8)
        return head + self.rng.randbytes(max(0, size - len(head)))

    def _message(self, topic: str, queue_id: int, body: bytes, key: str) -> MessageToStore:
        properties = {
            "TAGS": f"tag{self.counter % 5}",
            "KEYS": f"k{key[:8]} order-{self.counter}",
            "UNIQ_KEY": key,
            "WAIT": "true",
        }
        return MessageToStore(
            topic,
            queue_id,
            body,
            properties=encode_properties(properties).encode(),
            born_timestamp=time.time_ns() // 1_000_000,
        )

    async def run(self, task_number: int) -> None:
        rng = random.Random(self.seed * 1000 + task_number)
        while True:
            topic = topic_name(rng.randrange(TOPICS))
            queue_id = rng.randrange(QUEUES)
            count = rng.randint(*BATCH_SIZES) if rng.random() < BATCH_RATIO else 1
            messages, keys = [], []
            for _ in range(count):
                body = self._body()
                key = digest(body)
                keys.append(key)
                messages.append(self._message(topic, queue_id, body, key))
            os.write(self.ack_fd, b"".join(_line("T", topic, queue_id, key) for key in keys))
            if count == 1:
                result = await self.store.put(messages[0])
            else:
                result = await self.store.put_batch(messages)
            if not result.ok:  # not acknowledged: it may or may not be there after a crash
                await anyio.sleep(0)
                continue
            if len(result.msg_ids) != count:
                raise RuntimeError(f"{count} messages put, {len(result.msg_ids)} message ids")
            lines = []
            for number, (key, msg_id) in enumerate(zip(keys, result.msg_ids, strict=True)):
                phys = decode_offset_msg_id(msg_id)[1]
                if number == 0 and phys != result.commit_log_offset:
                    raise RuntimeError(f"msg id {msg_id} != offset {result.commit_log_offset}")
                lines.append(_line("A", topic, queue_id, result.queue_offset + number, phys, key))
            os.write(self.ack_fd, b"".join(lines))
            # a put that needs no flush may never yield: let the store's own tasks run
            await anyio.sleep(0)


async def _child_main(args: argparse.Namespace) -> None:
    from ..store.loader import create_store

    config = StoreConfig(root_dir=args.root, flush=args.flush, **json.loads(args.config))
    store = create_store(args.store, config)
    await store.open()
    ack_fd = os.open(args.ack_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    putter = _Putter(store, ack_fd, args.seed)
    os.write(sys.stdout.fileno(), READY)
    try:
        async with anyio.create_task_group() as task_group:
            for number in range(args.tasks):
                task_group.start_soon(putter.run, number)
    except BaseException:
        # a put failed, or a task of the store did (and cancelled ours): say why and stop
        traceback.print_exc()
        try:
            with anyio.CancelScope(shield=True):
                await store.close()  # raises what failed in the store's own tasks
        except BaseException:
            traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)


def child_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="put into a store until killed")
    parser.add_argument("--store", required=True, help="store plugin name, e.g. mmap")
    parser.add_argument("--root", required=True, help="the store directory")
    parser.add_argument("--flush", choices=("sync", "async"), default="sync")
    parser.add_argument("--ack-file", required=True, help="attempt and ack lines go here")
    parser.add_argument("--seed", type=int, default=0, help="bodies, sizes, queues")
    parser.add_argument("--tasks", type=int, default=8, help="concurrent putters")
    parser.add_argument("--config", default="{}", help="more StoreConfig fields, as JSON")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    anyio.run(_child_main, args, backend=args.backend)


# --- the ack file ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ack:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    digest: str


@dataclass
class AckLog:
    attempts: dict[str, tuple[str, int]] = field(default_factory=dict)  # digest: queue
    acks: list[Ack] = field(default_factory=list)


def read_ack_file(path: Path) -> AckLog:
    """The whole lines of an ack file; a torn last line is ignored, a bad line elsewhere
    raises (the child writes whole lines with O_APPEND)."""
    log = AckLog()
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")
    lines.pop()  # the tail after the last newline: empty, or a line cut by the kill
    for number, raw in enumerate(lines):
        payload, _, crc = raw.decode(errors="replace").rpartition(" ")
        if f"{zlib.crc32(payload.encode()):08x}" != crc:
            raise CrashCheckError(f"{path}: line {number + 1} is corrupt: {raw[:80]!r}")
        fields = payload.split(" ")
        if fields[0] == "T":
            log.attempts[fields[3]] = (fields[1], int(fields[2]))
        elif fields[0] == "A":
            topic, queue_id, queue_offset, phys, key = fields[1:]
            log.acks.append(Ack(topic, int(queue_id), int(queue_offset), int(phys), key))
        else:
            raise CrashCheckError(f"{path}: line {number + 1} is of unknown kind {fields[0]!r}")
    return log


# --- the parent --------------------------------------------------------------------------


@dataclass
class CycleReport:
    cycle: int
    ran: float  # seconds the child put before it was killed
    attempted: int
    acked: int
    present: int  # acknowledged messages found after the crash
    extra: int  # records found that were attempted but never acknowledged
    records: int  # records in the store after recovery
    verified: int  # records read and checked in full
    verify_seconds: float


@dataclass
class CrashSummary:
    cycles: int = 0
    acked: int = 0
    present: int = 0
    extra: int = 0
    records: int = 0
    reports: list[CycleReport] = field(default_factory=list)

    def assert_sound(self, cycles: int) -> None:
        """Every cycle ran, put, and kept every acknowledged message; nothing invented."""
        assert self.cycles == cycles
        assert self.present == self.acked
        # every cycle had time to put: a kill before any acknowledgement proves nothing
        assert all(report.acked > 0 for report in self.reports), self.reports
        assert self.records >= self.acked + self.extra

    def as_dict(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "acked": self.acked,
            "present": self.present,
            "extra": self.extra,
            "records": self.records,
        }


@dataclass
class _Known:
    """What the parent has seen in the store after a clean close: it must stay."""

    at: dict[tuple[str, int, int], tuple[int, str]] = field(default_factory=dict)
    digests: set[str] = field(default_factory=set)
    min_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    max_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    attempts: dict[str, tuple[str, int]] = field(default_factory=dict)


def soak_cycles(default: int) -> int:
    """A crash test's cycle count: ``default`` times ``ROCKETMQ_CRASH_SOAK`` (``tox -e
    soak`` sets it; the default run keeps to a few cycles per backend)."""
    factor = os.environ.get("ROCKETMQ_CRASH_SOAK", "1")
    if not factor.isdigit() or int(factor) < 1:
        raise ValueError(f"ROCKETMQ_CRASH_SOAK is {factor!r}; a whole number >= 1 is expected")
    return default * int(factor)


def run_crash_cycles(
    store_name: str,
    root: str | os.PathLike[str],
    flush: str,
    cycles: int,
    seed: int,
    *,
    config: dict[str, Any] | None = None,
    tasks: int = 8,
    kill_after: tuple[float, float] = (0.2, 1.5),
    backend: str = "asyncio",
    old_samples: int = 32,
    key_samples: int = 50,
    work_dir: str | os.PathLike[str] | None = None,
    on_cycle: Callable[[CycleReport], None] | None = None,
) -> CrashSummary:
    """Put, SIGKILL, reopen and check, ``cycles`` times into the same store directory.

    Each cycle checks in full every record written since the previous cycle's clean close
    and ``old_samples`` older records per queue; the last cycle checks every record.
    ``config`` adds StoreConfig fields to ``CRASH_CONFIG``. Raises CrashCheckError on the
    first contradiction, RuntimeError if the child dies by itself.
    """
    from ..plugins import load_plugins

    root = Path(root)
    work = Path(work_dir) if work_dir is not None else root.with_name(root.name + "-crash")
    work.mkdir(parents=True, exist_ok=True)
    fields = {**CRASH_CONFIG, **(config or {})}
    host = load_plugins()
    rng = random.Random(seed)
    known = _Known()
    summary = CrashSummary()
    for cycle in range(cycles):
        ack_file = work / f"acks-{cycle:03d}.log"
        ack_file.unlink(missing_ok=True)
        child_seed = rng.randrange(1 << 30)
        ran = _run_child(
            [
                sys.executable,
                "-m",
                "rocketmq_core.testing.store_crash",
                f"--store={store_name}",
                f"--root={root}",
                f"--flush={flush}",
                f"--ack-file={ack_file}",
                f"--seed={child_seed}",
                f"--tasks={tasks}",
                f"--config={json.dumps(fields)}",
                f"--backend={backend}",
            ],
            delay=rng.uniform(*kill_after),
            stderr_path=work / f"child-{cycle:03d}.err",
        )
        acks = read_ack_file(ack_file)
        known.attempts.update(acks.attempts)
        config_obj = StoreConfig(root_dir=str(root), flush=flush, **fields)
        started = time.monotonic()
        report = anyio.run(
            _verify_cycle,
            store_name,
            config_obj,
            host,
            known,
            acks,
            random.Random(rng.randrange(1 << 30)),
            old_samples,
            key_samples,
            cycle == cycles - 1,
            backend=backend,
        )
        report.cycle = cycle
        report.ran = ran
        report.verify_seconds = round(time.monotonic() - started, 3)
        summary.cycles += 1
        summary.acked += report.acked
        summary.present += report.present
        summary.extra += report.extra
        summary.records = report.records
        summary.reports.append(report)
        if on_cycle is not None:
            on_cycle(report)
    return summary


def _run_child(command: list[str], delay: float, stderr_path: Path) -> float:
    """Start the child, wait until it runs, let it put for ``delay`` s, SIGKILL it."""
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        try:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], 60)
            line = process.stdout.readline() if ready else b""
            if line != READY:
                process.kill()
                process.wait()
                raise RuntimeError(
                    f"the crash child did not start: {_tail(stderr_path)}"
                    if ready
                    else "the crash child did not report it was running within 60 s"
                )
            started = time.monotonic()
            time.sleep(delay)
            if process.poll() is not None:
                raise RuntimeError(
                    f"the crash child exited with {process.returncode} before the kill:"
                    f" {_tail(stderr_path)}"
                )
            process.send_signal(signal.SIGKILL)
            process.wait()
            return round(time.monotonic() - started, 3)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def _tail(path: Path, size: int = 3000) -> str:
    return path.read_bytes()[-size:].decode(errors="replace")


async def _verify_cycle(
    store_name: str,
    config: StoreConfig,
    host: Any,
    known: _Known,
    acks: AckLog,
    rng: random.Random,
    old_samples: int,
    key_samples: int,
    full: bool,
) -> CycleReport:
    from ..store.loader import create_store

    store = create_store(store_name, config, host)
    await store.open()
    try:
        return await _Verifier(store, known, acks, rng).run(old_samples, key_samples, full)
    finally:
        await store.close()


class _Verifier:
    def __init__(
        self, store: MessageStore, known: _Known, acks: AckLog, rng: random.Random
    ) -> None:
        self.store = store
        self.known = known
        self.acks = acks
        self.rng = rng
        self.seen: dict[tuple[str, int, int], tuple[int, str, int]] = {}  # phys, digest, time
        self.seen_digests: set[str] = set()
        self.acked_digests: set[str] = set()
        self.verified = 0

    def fail(self, what: str) -> NoReturn:
        raise CrashCheckError(what)

    async def run(self, old_samples: int, key_samples: int, full: bool) -> CycleReport:
        store, known = self.store, self.known
        queues = {(t, q) for t, ids in store.queues().items() for q in ids}
        for topic, queue_id in known.max_offsets:
            if (topic, queue_id) not in queues:
                self.fail(f"queue {topic}/{queue_id} held messages and is gone")
        for ack in self.acks.acks:
            if (ack.topic, ack.queue_id) not in queues:
                self.fail(f"acknowledged {ack} but its queue does not exist")
        records = 0
        for topic, queue_id in sorted(queues):
            low = store.min_offset(topic, queue_id)
            high = store.max_offset(topic, queue_id)
            records += high - low
            before = known.max_offsets.get((topic, queue_id), 0)
            if low > known.min_offsets.get((topic, queue_id), low):
                self.fail(f"{topic}/{queue_id} starts at {low}; before the crash it started lower")
            if high < before:
                self.fail(
                    f"{topic}/{queue_id} ends at {high}; before the crash it ended at {before}"
                )
            start = low if full else max(low, before)
            await self._read_range(topic, queue_id, start, high)
            if not full:
                await self._sample_old(topic, queue_id, low, start, old_samples)
        present = self._check_acks()
        await self._check_keys(key_samples)
        extra = 0
        for key, (topic, queue_id, _) in self._new_records().items():
            if key not in self.acked_digests:
                extra += 1
                if known.attempts.get(key) != (topic, queue_id):
                    self.fail(f"{topic}/{queue_id} holds a record never attempted there: {key}")
        # everything seen now was closed cleanly below: later cycles must find it
        for where, (phys, key, _) in self.seen.items():
            known.at[where] = (phys, key)
            known.digests.add(key)
        for topic, queue_id in queues:
            known.min_offsets[(topic, queue_id)] = store.min_offset(topic, queue_id)
            known.max_offsets[(topic, queue_id)] = store.max_offset(topic, queue_id)
        return CycleReport(
            cycle=0,
            ran=0.0,
            attempted=len(self.acks.attempts),
            acked=len(self.acks.acks),
            present=present,
            extra=extra,
            records=records,
            verified=self.verified,
            verify_seconds=0.0,
        )

    def _new_records(self) -> dict[str, tuple[str, int, int]]:
        return {
            key: where for where, (_, key, _) in self.seen.items() if key not in self.known.digests
        }

    async def _read_range(self, topic: str, queue_id: int, start: int, end: int) -> None:
        offset = start
        while offset < end:
            result = await self.store.get(topic, queue_id, offset, 32)
            if not result.records:
                self.fail(
                    f"{topic}/{queue_id}: no record at offset {offset} (max {end}):"
                    f" {result.status.name}"
                )
            expected = list(range(offset, offset + len(result.records)))
            if result.queue_offsets != expected:
                self.fail(
                    f"{topic}/{queue_id}: a gap: asked from {offset}, got offsets"
                    f" {result.queue_offsets[:8]}..."
                )
            for queue_offset, raw in zip(result.queue_offsets, result.records, strict=True):
                await self._check_record(topic, queue_id, queue_offset, bytes(raw))
            offset = expected[-1] + 1

    async def _check_record(self, topic: str, queue_id: int, queue_offset: int, raw: bytes) -> None:
        where = f"{topic}/{queue_id} offset {queue_offset}"
        try:
            message = decode_record(raw, check_crc=True)
        except RecordError as exc:
            self.fail(f"{where}: {exc}")
        if message.size != len(raw):
            self.fail(f"{where}: a {len(raw)}-byte record that says it is {message.size}")
        if (message.topic, message.queue_id, message.queue_offset) != (
            topic,
            queue_id,
            queue_offset,
        ):
            self.fail(
                f"{where}: the record says {message.topic}/{message.queue_id}"
                f" offset {message.queue_offset}"
            )
        key = digest(message.body)
        if message.properties.get("UNIQ_KEY") != key:
            self.fail(f"{where}: body and UNIQ_KEY disagree")
        at = await self.store.message_at(message.commit_log_offset)
        if at != raw:
            self.fail(
                f"{where}: the consume queue and the CommitLog disagree at"
                f" {message.commit_log_offset}"
            )
        earlier = self.known.at.get((topic, queue_id, queue_offset))
        if earlier is not None and earlier != (message.commit_log_offset, key):
            self.fail(f"{where}: changed since it was read after a clean close")
        if earlier is None and key in self.known.digests:
            self.fail(f"{where}: a duplicate of a message stored elsewhere ({key})")
        if key in self.seen_digests:
            self.fail(f"{where}: a duplicate of a message stored elsewhere ({key})")
        self.seen_digests.add(key)
        self.seen[(topic, queue_id, queue_offset)] = (
            message.commit_log_offset,
            key,
            message.store_timestamp,
        )
        self.verified += 1

    async def _sample_old(self, topic: str, queue_id: int, low: int, end: int, count: int) -> None:
        """Records the previous cycle saw: a sample, the first and the last, read again."""
        if end <= low:
            return
        offsets = {low, end - 1}
        offsets.update(self.rng.randrange(low, end) for _ in range(count))
        for offset in sorted(offsets):
            result = await self.store.get(topic, queue_id, offset, 1)
            if result.queue_offsets != [offset]:
                self.fail(f"{topic}/{queue_id}: offset {offset} is gone: {result.status.name}")
            await self._check_record(topic, queue_id, offset, bytes(result.records[0]))

    def _check_acks(self) -> int:
        present = 0
        for ack in self.acks.acks:
            where = (ack.topic, ack.queue_id, ack.queue_offset)
            found = self.seen.get(where)
            if found is None:
                self.fail(f"acknowledged {ack}, but the store has no record there")
            if found[:2] != (ack.commit_log_offset, ack.digest):
                self.fail(
                    f"acknowledged {ack}, but the store holds {found[1]} at CommitLog"
                    f" offset {found[0]} there"
                )
            self.acked_digests.add(ack.digest)
            present += 1
        return present

    async def _check_keys(self, count: int) -> None:
        """A sample of acknowledged messages is found by its key (the index survived)."""
        by_digest = {key: (where, stamp) for where, (_, key, stamp) in self.seen.items()}
        sample = self.acks.acks
        if len(sample) > count:
            sample = self.rng.sample(sample, count)
        for ack in sample:
            _, stamp = by_digest[ack.digest]
            result = await self.store.query_by_key(ack.topic, ack.digest, 64, stamp, stamp)
            bodies = {digest(decode_record(bytes(r)).body) for r in result.records}
            if ack.digest not in bodies:
                self.fail(f"acknowledged {ack}, but query_by_key does not find it")


if __name__ == "__main__":
    child_main()
