"""Durable small files: configs, offsets, KV tables (DESIGN rule 5).

Blocking; call through ``anyio.to_thread.run_sync`` from the event loop.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

SECRET_FILE_MODE = 0o600  # owner-only: for files that hold secret keys


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole.

    The file keeps the permission bits it has; a new one gets ``mode`` (SECRET_FILE_MODE for
    files that hold secrets), or without it the process's default (0o666 less the umask).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    kept: int | None
    try:
        kept = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        kept = mode
    try:
        with _create(temporary, kept) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError:
        temporary.unlink(missing_ok=True)  # a full disk: leave no partial file behind
        raise
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # make the rename itself durable
    finally:
        os.close(directory)


def _create(path: Path, mode: int | None) -> BinaryIO:
    """``path`` opened for writing, with ``mode`` (None: the process's default)."""
    if mode is None:
        return open(path, "wb")
    # created owner-only, so it is never readable by others while it is written
    handle = os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
    os.fchmod(handle.fileno(), mode)
    return handle


def read_optional(path: str | os.PathLike[str]) -> bytes | None:
    """The file's bytes, or None when it does not exist yet."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None


def write_config_file(path: str | os.PathLike[str], data: bytes) -> None:
    """RocketMQ's config-file discipline: the previous version stays as ``<name>.bak``."""
    target = Path(path)
    if target.exists():
        atomic_write(target.with_name(target.name + ".bak"), target.read_bytes())
    atomic_write(target, data)


def read_config_file(path: str | os.PathLike[str]) -> tuple[bytes | None, Path | None]:
    """(content, where from): the file, else its ``.bak`` when it is missing or empty."""
    target = Path(path)
    for candidate in (target, target.with_name(target.name + ".bak")):
        data = read_optional(candidate)
        if data and data.strip():
            return data, candidate
    return None, None
