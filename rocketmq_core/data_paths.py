"""Checks that a server's data paths can be used, made before it writes anything.

A store directory that is read-only, or a path that runs through a regular file, would
otherwise fail deep inside a store's open (or at the first persist, minutes later).
Each check raises a ConfigError that names the setting, the path and the fix. Blocking:
call through ``anyio.to_thread.run_sync`` from the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError


def check_writable_directory(
    path: str | os.PathLike[str], key: str, remedy: str | None = None
) -> None:
    """``path`` is a directory this process can write, or one it can create; ``key``
    names the setting, ``remedy`` the other way out (default: choose another ``key``)."""
    target = Path(path)
    remedy = remedy or f"choose another {key}"
    existing = _nearest_existing(target, key, remedy)
    if existing == target and not existing.is_dir():
        raise ConfigError(f"{key} {target} is a file, not a directory: {remedy}")
    _check_writable(existing, target, key, remedy)
    if existing == target:  # data from an earlier run: another user's files, say
        unusable = _first_unusable(target)
        if unusable is not None:
            raise ConfigError(
                f"{key} {target} holds {unusable}, which this user cannot read and write;"
                f" make it writable (chmod, chown) or {remedy}"
            )


def check_writable_file(path: str | os.PathLike[str], key: str) -> None:
    """``path`` is a regular file this process can replace, or one it can create."""
    target = Path(path)
    remedy = f"choose another {key}"
    existing = _nearest_existing(target, key, remedy)
    if existing == target:
        if existing.is_dir():
            raise ConfigError(f"{key} {target} is a directory, not a file: name a file")
        existing = target.parent  # files are replaced through their directory
    _check_writable(existing, target, key, remedy)


def _check_writable(existing: Path, configured: Path, key: str, remedy: str) -> None:
    """``existing`` (``configured`` or the ancestor it would be made in) is a directory
    this process can write in."""
    if not existing.is_dir():
        raise ConfigError(
            f"{key} {configured} cannot be created: {existing} is a file, not a directory; {remedy}"
        )
    if not os.access(existing, os.W_OK | os.X_OK, effective_ids=_EFFECTIVE_IDS):
        where = "is" if existing == configured else f"cannot be written: {existing} is"
        raise ConfigError(
            f"{key} {configured} {where} not writable by this user;"
            f" make it writable (chmod, chown) or {remedy}"
        )


def data_path_error(error: OSError, key: str, path: str | os.PathLike[str]) -> ConfigError:
    """What an OSError met while opening the data under ``path`` (``key``) means to the
    operator: the file it happened on, why, and what to do."""
    culprit = error.filename or path
    return ConfigError(
        f"{key} {path} cannot be used: {error.strerror or error} ({culprit});"
        f" fix its permissions or free space, or choose another {key}"
    )


# os.access by the effective user where the platform can (a setuid server)
_EFFECTIVE_IDS = os.access in os.supports_effective_ids


# how deep the start-up check looks: the store's own files (commitlog/, config/, index/,
# checkpoint); each topic's queue files below are left to the open's OSError, so that
# start-up costs the same with 10 topics or 100,000
CHECKED_LEVELS = 2


def _first_unusable(root: Path) -> str | None:
    """A directory or file near the top of ``root`` this process cannot read and write."""
    unreadable: list[str] = []
    top_depth = len(root.parts)
    for directory, subdirectories, files in os.walk(
        root, onerror=lambda error: unreadable.append(error.filename)
    ):
        if unreadable:
            break
        if len(Path(directory).parts) - top_depth + 1 >= CHECKED_LEVELS:
            subdirectories.clear()
        if not os.access(directory, os.R_OK | os.W_OK | os.X_OK, effective_ids=_EFFECTIVE_IDS):
            return directory
        for name in files:
            path = os.path.join(directory, name)
            if not os.access(path, os.R_OK | os.W_OK, effective_ids=_EFFECTIVE_IDS):
                return path
    return unreadable[0] if unreadable else None


def _nearest_existing(target: Path, key: str, remedy: str) -> Path:
    """``target`` or its nearest ancestor that exists."""
    for candidate in (target, *target.parents):
        try:
            candidate.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue  # not there yet, or under a file that a parent check will find
        except PermissionError:
            raise ConfigError(
                f"{key} {target} cannot be reached: no permission to look inside"
                f" {candidate.parent}; make it readable or {remedy}"
            ) from None
        return candidate
    return Path(target.anchor or ".")
