"""What the ACL admin requests do to the files (docs/spec/ACL.md §5): create or update an
account, delete one, replace a file's global white list, and read the versions and the
accounts back.

A new accessKey goes to the default file; an existing one is changed in the file that
defines it. Each change re-reads that file from disk, checks the result as a load would,
writes it atomically and counts its ``dataVersion`` up. The writers are blocking: run them
in a worker thread, one at a time, then reload the rules. A change the files cannot take
raises AclAdminError, whose message is the remark to answer with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RocketMQError
from ..protocol.bodies.acl import AclConfigBody, PlainAccessConfig
from ..protocol.bodies.topics import DataVersion
from .addresses import AddressPattern, AddressPatternError
from .permissions import PERM_BY_TEXT, is_known_perm
from .rules import (
    DEFAULT_FILE,
    MIN_KEY_LENGTH,
    SUFFIXES,
    TOOLS_FILE,
    AccountConfig,
    AclConfigError,
    AclFile,
    AclRules,
    read_acl_file,
    write_acl_file,
)

DATA_VERSION = "dataVersion"
KNOWN_PERMS = " or ".join(PERM_BY_TEXT)


class AclAdminError(RocketMQError):
    """An admin change the ACL files cannot take; the message is the response remark."""


@dataclass(frozen=True)
class AccountUpdate:
    """UPDATE_AND_CREATE_ACL_CONFIG: None (or an empty perm) keeps what the file has; the
    admin flag is always written (Java sends it on every update, false by default)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"AccountUpdate(access_key={self.access_key!r}, admin={self.admin})"

    def check(self) -> None:
        """Both keys longer than 6 characters, every perm one of the five strings."""
        for key, value in (("accessKey", self.access_key), ("secretKey", self.secret_key)):
            if len(value or "") < MIN_KEY_LENGTH:
                size = f"it has {len(value)}" if value else "missing"
                raise AclAdminError(
                    f"accessKey {self.access_key!r}: {key} must be longer than 6 characters"
                    f" ({size})"
                )
        for key, perm in (
            ("defaultTopicPerm", self.default_topic_perm),
            ("defaultGroupPerm", self.default_group_perm),
        ):
            if perm and not is_known_perm(perm):
                raise AclAdminError(
                    f"accessKey {self.access_key}: {key} {perm!r} is no permission;"
                    f" use {KNOWN_PERMS}"
                )
        for key, entries in (("topicPerms", self.topic_perms), ("groupPerms", self.group_perms)):
            for entry in entries or ():
                name, equals, perm = entry.partition("=")
                if not equals or "=" in perm or not name.strip():
                    raise AclAdminError(
                        f"accessKey {self.access_key}: {key} entry {entry!r} must be"
                        " name=PERM, for example TopicA=SUB"
                    )
                if not is_known_perm(perm):
                    raise AclAdminError(
                        f"accessKey {self.access_key}: {key} entry {entry!r}: the permission"
                        f" must be {KNOWN_PERMS}"
                    )

    def applied_to(self, written: dict[str, Any]) -> dict[str, Any]:
        """The account's keys once this update is merged into what the file has."""
        merged = dict(written)
        merged["accessKey"] = self.access_key
        if self.secret_key:
            merged["secretKey"] = self.secret_key
        if self.white_remote_address is not None:
            merged["whiteRemoteAddress"] = self.white_remote_address
        merged["admin"] = self.admin
        if self.default_topic_perm:
            merged["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm:
            merged["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms is not None:
            merged["topicPerms"] = list(self.topic_perms)
        if self.group_perms is not None:
            merged["groupPerms"] = list(self.group_perms)
        return merged


# --- changes ------------------------------------------------------------------------------


def update_account(rules: AclRules, update: AccountUpdate, now_ms: int) -> Path:
    """Create or change one account; the file written. Blocking."""
    update.check()
    holder = rules.file_holding(update.access_key)
    path = holder.path if holder is not None else rules.home / DEFAULT_FILE
    acl_file = _read_for_change(path)
    position = _position(acl_file, update.access_key)
    written = acl_file.accounts[position].to_mapping() if position is not None else {}
    try:
        account = AccountConfig.from_mapping(
            update.applied_to(written), f"{path}: accessKey {update.access_key}"
        )
    except AclConfigError as exc:
        raise AclAdminError(str(exc)) from None
    if position is None:
        acl_file.accounts.append(account)
    else:
        acl_file.accounts[position] = account
    _write(acl_file, now_ms)
    return path


def delete_account(rules: AclRules, access_key: str, now_ms: int) -> Path:
    """Remove one account from the file that defines it; the file written. Blocking."""
    failed = f"The accesskey[{access_key}] corresponding to accessConfig has been deleted failed."
    holder = rules.file_holding(access_key)
    if holder is None:
        raise AclAdminError(f"{failed} No ACL file under {rules.home} defines it.")
    acl_file = _read_for_change(holder.path)
    position = _position(acl_file, access_key)
    if position is None:
        raise AclAdminError(f"{failed} {holder.path} no longer defines it.")
    del acl_file.accounts[position]
    _write(acl_file, now_ms)
    return holder.path


def update_global_white(
    rules: AclRules, addresses: list[str], file_path: str | None, now_ms: int
) -> Path:
    """Replace the global white list of one file (the default file when ``file_path`` is
    empty); the file written. Blocking."""
    failed = f"The globalWhiteAddresses[{','.join(addresses)}] has been updated failed."
    home = rules.home
    path = Path(file_path) if file_path else home / DEFAULT_FILE
    if file_path:
        if not path.is_absolute() or not path.resolve().is_relative_to(home.resolve()):
            raise AclAdminError(f"{failed} {path} is not an ACL file under {home}.")
        if path.suffix not in SUFFIXES or path.resolve() == (home / TOOLS_FILE).resolve():
            raise AclAdminError(f"{failed} {path} is not an ACL file (*.yml or *.yaml).")
        if not path.is_file():
            raise AclAdminError(f"{failed} {path} does not exist.")
    for pattern in addresses:
        try:
            AddressPattern.compile(pattern)
        except AddressPatternError as exc:
            raise AclAdminError(f"{failed} {exc}") from None
    acl_file = _read_for_change(path)
    acl_file.global_white_remote_addresses = list(addresses)
    _write(acl_file, now_ms)
    return path


def _read_for_change(path: Path) -> AclFile:
    """The file as it is on disk now; an empty one when it is missing or holds nothing."""
    if not path.exists():
        return AclFile(path)
    try:
        return read_acl_file(path) or AclFile(path)
    except AclConfigError as exc:
        raise AclAdminError(f"{exc}; fix the file first") from None


def _position(acl_file: AclFile, access_key: str) -> int | None:
    for index, account in enumerate(acl_file.accounts):
        if account.access_key == access_key:
            return index
    return None


def _write(acl_file: AclFile, now_ms: int) -> None:
    version = file_version(acl_file, default_timestamp=now_ms).next(now_ms)
    acl_file.others[DATA_VERSION] = [{"counter": version.counter, "timestamp": version.timestamp}]
    try:
        write_acl_file(acl_file)
    except OSError as exc:
        raise AclAdminError(f"cannot write {acl_file.path}: {exc}") from None


# --- reads --------------------------------------------------------------------------------


def file_version(acl_file: AclFile, *, default_timestamp: int) -> DataVersion:
    """The file's ``dataVersion`` (its first element), or counter 0 when it has none."""
    written = acl_file.others.get(DATA_VERSION)
    first = written[0] if isinstance(written, list) and written else written
    if isinstance(first, dict):
        try:
            return DataVersion(int(first.get("counter", 0)), int(first.get("timestamp", 0)))
        except (TypeError, ValueError):
            pass  # a hand-edited version that is no number: count from 0
    return DataVersion(0, default_timestamp)


def versions(rules: AclRules) -> tuple[DataVersion, dict[str, DataVersion]]:
    """(the default file's version, every loaded file's version by path). Blocking: a file
    without a version is dated by its modification time."""
    by_path = {}
    for acl_file in rules.files:
        try:
            modified = int(os.stat(acl_file.path).st_mtime * 1000)
        except OSError:
            modified = 0
        by_path[str(acl_file.path)] = file_version(acl_file, default_timestamp=modified)
    default = by_path.get(str(rules.home / DEFAULT_FILE), DataVersion())
    return default, by_path


def acl_config(rules: AclRules) -> AclConfigBody:
    """Every file's global white list, and each account as first defined, secrets in clear."""
    body = AclConfigBody()
    seen: set[str] = set()
    for acl_file in rules.files:
        body.global_white_addrs.extend(acl_file.global_white_remote_addresses)
        for account in acl_file.accounts:
            if account.access_key in seen:
                continue
            seen.add(account.access_key)
            body.plain_access_configs.append(
                PlainAccessConfig(
                    access_key=account.access_key,
                    secret_key=account.secret_key,
                    white_remote_address=account.white_remote_address or None,
                    admin=account.admin,
                    default_topic_perm=account.default_topic_perm,
                    default_group_perm=account.default_group_perm,
                    topic_perms=list(account.topic_perms),
                    group_perms=list(account.group_perms),
                )
            )
    return body
