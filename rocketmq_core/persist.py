"""Durable small files: configs, offsets, KV tables (DESIGN rule 5).

Blocking; call through ``anyio.to_thread.run_sync`` from the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
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
