"""Which CommitLog files have expired: those last written before ``fileReservedTime``."""

from __future__ import annotations

from pathlib import Path


def expired(path: Path, now: float, reserved_hours: float) -> bool:
    """A file last written more than ``fileReservedTime`` hours ago."""
    try:
        modified = path.stat().st_mtime
    except FileNotFoundError:
        return True
    return now - modified > reserved_hours * 3600
