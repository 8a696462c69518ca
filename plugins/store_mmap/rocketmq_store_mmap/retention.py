"""Retention and disk guards (STORE.md §16): which CommitLog files may go, and when
the disk is too full to take more."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rocketmq_core.store.api import StoreConfig


def delete_hours(delete_when: str) -> set[int]:
    """``deleteWhen``: hours of the day, ``;``-separated (``"04"``, ``"04;16"``)."""
    hours = set()
    for part in delete_when.split(";"):
        part = part.strip()
        if part.isdigit() and 0 <= int(part) <= 23:
            hours.add(int(part))
    return hours


def disk_used_percent(path: Path) -> float:
    usage = shutil.disk_usage(path)
    return 100.0 * (usage.total - usage.free) / usage.total if usage.total else 0.0


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


def expired(path: Path, now: float, reserved_hours: float) -> bool:
    """A file last written more than ``fileReservedTime`` hours ago."""
    try:
        modified = path.stat().st_mtime
    except FileNotFoundError:
        return True
    return now - modified > reserved_hours * 3600
