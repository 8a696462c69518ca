"""Recovery at open (STORE.md §7): find where the CommitLog really ends and bring the
consume queues and the index up to it.

The checkpoint says below which CommitLog offset every derived entry is on disk; the
records after it are validated (magic, size, own offset, body CRC) and dispatched
again, idempotently. The log ends at the first invalid record: a torn tail is cut and
zeroed, consume-queue entries pointing past the end are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rocketmq_core.protocol.message import StoredMessage, tags_code
from rocketmq_core.store.api import Dispatcher, DispatchRequest

from .commitlog import CommitLog
from .consume_queue import ConsumeQueue
from .record_requests import TagsCodeRule

log = logging.getLogger("rocketmq.store.mmap")

__all__ = ["TagsCodeRule", "dispatch_request", "recover"]


def dispatch_request(message: StoredMessage, rules: Iterable[TagsCodeRule]) -> DispatchRequest:
    """What the dispatchers were told when ``message`` was appended, from the whole
    decoded message (recovery reads records with ``record_requests.read_request``, which
    must give the same)."""
    code = None
    for rule in rules:
        code = rule(message)
        if code is not None:
            break
    if code is None:
        code = tags_code(message.tags)
    properties = message.properties
    return DispatchRequest(
        message.topic,
        message.queue_id,
        message.commit_log_offset,
        message.size,
        code,
        message.store_timestamp,
        message.queue_offset,
        properties.get("KEYS"),
        properties.get("UNIQ_KEY"),
        message.sys_flag,
        message.prepared_transaction_offset,
    )


def recover(
    commitlog: CommitLog,
    queues: Iterable[ConsumeQueue],
    dispatchers: list[Dispatcher],
    *,
    start: int,
    check_crc: bool,
    after_crash: bool,
    rules: Iterable[TagsCodeRule] = (),
) -> tuple[int, int]:
    """Replay from ``start``; returns (the CommitLog's valid end, records replayed)."""
    rules = list(rules)
    replayed = 0
    # after a crash, validate from the start of the checkpoint's file (as Java does): the
    # checkpoint vouches for derived entries, not for the CommitLog bytes below it
    holder = commitlog.files.find(start - 1) if after_crash and start > 0 else None
    for position, request in commitlog.scan(holder.start if holder else start, check_crc, rules):
        if position < start:
            continue  # validated only: its entries are on disk already
        for dispatcher in dispatchers:
            dispatcher(request)
        replayed += 1
    end = commitlog.scan_end
    # after a crash, bytes past the end may be old records: erase them
    commitlog.truncate_after(end, zero=after_crash)
    for queue in queues:
        queue.truncate_from_phys(end)
        queue.correct_min_offset(commitlog.min_offset)
    if replayed:
        log.info("recovery replayed %d records; the CommitLog ends at %d", replayed, end)
    return end, replayed
