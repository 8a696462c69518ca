"""Retention and disk guards every persistent store applies (STORE.md §16): when expired
data may go, when the oldest must go whatever its age, when the disk is too full to
take more."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..rate_limited_log import RateLimitedLog
from .api import PutResult, PutStatus, StoreConfig

log = logging.getLogger("rocketmq.store")
# checked every second: a missing directory is reported at a bounded rate
_unchecked_log = RateLimitedLog(log)


def delete_hours(delete_when: str) -> set[int]:
    """``deleteWhen``: hours of the day, ``;``-separated (``"04"``, ``"04;16"``)."""
    hours = set()
    for part in delete_when.split(";"):
        part = part.strip()
        if part.isdigit() and 0 <= int(part) <= 23:
            hours.add(int(part))
    return hours


def disk_used_percent(path: Path) -> float:
    """As Java reckons it (and df's Use%): used over used plus what users may still
    write. Blocks reserved for root count as neither, so a volume with a large reserve
    is not taken for fuller than it is."""
    usage = shutil.disk_usage(path)
    entire = usage.used + usage.free
    return 100.0 * usage.used / entire if entire else 0.0


@dataclass(frozen=True)
class CleanupDecision:
    delete_expired: bool  # files past fileReservedTime may go now
    forcibly: bool  # the disk is nearly full: the oldest files go whatever their age
    refuse_writes: bool  # the disk is full: puts are refused until it is not
    used_percent: float


def decide(config: StoreConfig, used_percent: float, now: float, manual: bool) -> CleanupDecision:
    hour = time.localtime(now).tm_hour
    return CleanupDecision(
        delete_expired=manual
        or hour in delete_hours(config.delete_when)
        or used_percent >= config.disk_max_used_space_ratio,
        forcibly=used_percent >= config.disk_space_clean_forcibly_ratio,
        refuse_writes=used_percent >= config.disk_space_warning_level_ratio,
        used_percent=used_percent,
    )


# what Java's broker answers a send while its store is not writable (code 14); the
# bracket holds the used ratios of the CommitLog, consume-queue and index disks
DISK_FULL_REMARK = (
    "service not available now. It may be caused by one of the following reasons:"
    " the broker's disk is full [{ratios}], messages are put to the slave,"
    " message store has been shut down, etc."
)
DISK_CHECK_INTERVAL = 1.0  # seconds: a full disk is noticed, and a freed one, this quickly


def disk_full_remark(used_percent: float) -> str:
    """Java's remark, with one ratio for all three: our store keeps them on one disk."""
    ratio = f"{used_percent / 100:5.2f}"
    return DISK_FULL_REMARK.format(ratios=f"CL: {ratio} CQ: {ratio} INDEX: {ratio}")


class DiskGuard:
    """Refuses puts while the disk holding a store is too full, and says so once.

    A blocking statfs sets ``refusing``; the put path only reads it. ``watch`` runs the
    check every second, so writes resume with no restart once space is freed.
    """

    def __init__(self, config: StoreConfig, root: Path) -> None:
        self.config = config
        self.root = root
        self.refusing: str | None = None  # why puts are refused

    def refusal(self) -> PutResult | None:
        if self.refusing is not None:
            return PutResult.refused(PutStatus.SERVICE_NOT_AVAILABLE, self.refusing)
        return None

    def update(self, decision: CleanupDecision) -> None:
        if decision.refuse_writes:
            if self.refusing is None:
                log.error("disk %.0f%% used: refusing new messages", decision.used_percent)
            self.refusing = (
                f"{disk_full_remark(decision.used_percent)} The disk holding {self.root} is"
                f" {decision.used_percent:.0f}% used (diskSpaceWarningLevelRatio"
                f" {self.config.disk_space_warning_level_ratio}%): free space there"
            )
            return
        if self.refusing is not None:
            log.warning("disk %.0f%% used: accepting messages again", decision.used_percent)
        elif decision.used_percent >= self.config.disk_max_used_space_ratio:
            log.warning(
                "disk %.0f%% used (diskMaxUsedSpaceRatio %d%%): expired files go now",
                decision.used_percent,
                self.config.disk_max_used_space_ratio,
            )
        self.refusing = None

    def check(self, now: float, manual: bool) -> CleanupDecision:
        """Blocking (a statfs): decide what retention may do now, and update the guard."""
        decision = decide(self.config, disk_used_percent(self.root), now, manual)
        self.update(decision)
        return decision

    async def watch(self, interval: float = DISK_CHECK_INTERVAL) -> None:
        """Re-check the disk every ``interval`` seconds, off the event loop, until cancelled."""
        while True:
            await anyio.sleep(interval)
            try:
                await anyio.to_thread.run_sync(self.check, time.time(), False)
            except OSError as exc:  # the store's directory went away: keep the last verdict
                _unchecked_log.warning("cannot check the free space under %s: %s", self.root, exc)
