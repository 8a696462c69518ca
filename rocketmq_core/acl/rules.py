"""plain_acl.yml: reading, checking and writing the account files, and the rules the
validator uses, indexed once per load (docs/spec/ACL.md §2).

The files are ``<home>/conf/plain_acl.yml`` and every ``*.yml``/``*.yaml`` under
``<home>/conf/acl`` (``conf/acl/tools.yml`` is a client's credentials, not rules). The
default file comes first, then the others by path; an accessKey defined twice keeps its
first definition. A file that cannot be used raises AclConfigError naming the file, the
account and the key. ``AclFile`` and ``AccountConfig`` keep what the file says (the
admin requests read and rewrite them); ``AclRules`` is the compiled form.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..persist import SECRET_FILE_MODE, atomic_write
from .addresses import AddressPattern, AddressPatternError
from .home import acl_home as acl_home  # where the servers read it from
from .permissions import Grants, parse_perm, retry_topic

log = logging.getLogger("rocketmq.acl")

DEFAULT_FILE = Path("conf") / "plain_acl.yml"
EXTRA_DIR = Path("conf") / "acl"
# a tools.yml among the rule files is a client's credentials, not rules (docs/spec/ACL.md);
# mqadmin's own is conf/tools.yml, outside conf/acl (cli/base.py reads it)
TOOLS_FILE = EXTRA_DIR / "tools.yml"
SUFFIXES = (".yml", ".yaml")
MIN_KEY_LENGTH = 7  # "longer than 6 characters"


class AclConfigError(ConfigError):
    """An ACL file that cannot be used; the message names the file, account and key."""


def acl_files(home: Path) -> list[Path]:
    """The ACL files that exist: the default file, then conf/acl/**/*.yml|yaml by path."""
    files = [home / DEFAULT_FILE] if (home / DEFAULT_FILE).is_file() else []
    extra_dir = home / EXTRA_DIR
    if extra_dir.is_dir():
        tools = home / TOOLS_FILE
        for path in sorted(extra_dir.rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and path != tools:
                files.append(path)
    return files


# --- what a file says --------------------------------------------------------------------


@dataclass
class AccountConfig:
    """One entry of ``accounts``, as written (perm strings unparsed)."""

    access_key: str
    secret_key: str
    white_remote_address: str = ""
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] = field(default_factory=list)
    group_perms: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # never print the secret
        return f"AccountConfig(access_key={self.access_key!r}, admin={self.admin})"

    @classmethod
    def from_mapping(cls, entry: Any, where: str) -> AccountConfig:
        """Read and check one account; ``where`` names it in errors (file, position)."""
        if not isinstance(entry, Mapping):
            raise AclConfigError(f"{where}: an account must be a mapping of keys, not {entry!r}")
        access_key = _text(entry.get("accessKey"))
        where = f"{where} (accessKey {access_key})" if access_key else where
        secret_key = _text(entry.get("secretKey"))
        for key, value in (("accessKey", access_key), ("secretKey", secret_key)):
            if len(value) < MIN_KEY_LENGTH:
                raise AclConfigError(
                    f"{where}: {key} must be longer than 6 characters"
                    f" ({'missing' if not value else f'it has {len(value)}'})"
                )
            if not _encodable(value):  # a lone surrogate (a YAML "\ud800" escape)
                raise AclConfigError(
                    f"{where}: {key} holds text no request can carry (an unpaired"
                    " surrogate escape such as \\ud800): write the key as plain text"
                )
        account = cls(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=_text(entry.get("whiteRemoteAddress")),
            admin=_flag(entry.get("admin"), f"{where}: admin"),
            default_topic_perm=_optional_text(entry.get("defaultTopicPerm")),
            default_group_perm=_optional_text(entry.get("defaultGroupPerm")),
            topic_perms=_text_list(entry.get("topicPerms"), f"{where}: topicPerms"),
            group_perms=_text_list(entry.get("groupPerms"), f"{where}: groupPerms"),
        )
        account.compile(where)  # every perm entry and the address pattern must read
        return account

    def to_mapping(self) -> dict[str, Any]:
        """The account as plain_acl.yml writes it."""
        mapping: dict[str, Any] = {"accessKey": self.access_key, "secretKey": self.secret_key}
        if self.white_remote_address:
            mapping["whiteRemoteAddress"] = self.white_remote_address
        mapping["admin"] = self.admin
        if self.default_topic_perm is not None:
            mapping["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm is not None:
            mapping["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms:
            mapping["topicPerms"] = list(self.topic_perms)
        if self.group_perms:
            mapping["groupPerms"] = list(self.group_perms)
        return mapping

    def compile(self, where: str, source: Path | None = None) -> Account:
        """The account as the validator uses it; AclConfigError for a bad entry."""
        explicit: dict[str, int] = {}
        # groups first, then topics: a later entry for the same resource wins
        for key, entries, as_resource in (
            ("groupPerms", self.group_perms, retry_topic),
            ("topicPerms", self.topic_perms, str),
        ):
            for entry in entries:
                name, perm = _perm_entry(entry, f"{where}: {key}")
                explicit[as_resource(name)] = parse_perm(perm)
        try:
            white = AddressPattern.compile(self.white_remote_address)
        except AddressPatternError as exc:
            raise AclConfigError(f"{where}: whiteRemoteAddress {exc}") from None
        grants = Grants(
            default_topic=parse_perm(self.default_topic_perm),
            default_group=parse_perm(self.default_group_perm),
            explicit=explicit,
            admin=self.admin,
        )
        return Account(self.access_key, self.secret_key, white, grants, source)


@dataclass
class AclFile:
    """One ACL file: its global white list, its accounts, and the other keys it holds
    (``dataVersion``...), kept so that a rewrite loses nothing."""

    path: Path
    global_white_remote_addresses: list[str] = field(default_factory=list)
    accounts: list[AccountConfig] = field(default_factory=list)
    others: dict[str, Any] = field(default_factory=dict)

    def to_mapping(self) -> dict[str, Any]:
        mapping: dict[str, Any] = {
            "globalWhiteRemoteAddresses": list(self.global_white_remote_addresses),
            "accounts": [account.to_mapping() for account in self.accounts],
        }
        mapping.update(self.others)
        return mapping


def read_acl_file(path: Path) -> AclFile | None:
    """The file, checked; None when it holds nothing (skipped, as Java skips it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"{path}: cannot read it: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise AclConfigError(f"{path}: not valid YAML: {detail}") from None
    if data is None or data == {}:
        return None
    if not isinstance(data, Mapping):
        raise AclConfigError(f"{path}: expected keys such as accounts, not {type(data).__name__}")
    whites = _text_list(
        data.get("globalWhiteRemoteAddresses"), f"{path}: globalWhiteRemoteAddresses"
    )
    for pattern in whites:
        try:
            AddressPattern.compile(pattern)
        except AddressPatternError as exc:
            raise AclConfigError(f"{path}: globalWhiteRemoteAddresses {exc}") from None
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError(f"{path}: accounts must be a list of accounts")
    accounts = [
        AccountConfig.from_mapping(entry, f"{path}: accounts[{index}]")
        for index, entry in enumerate(raw_accounts)
    ]
    others = {
        key: value
        for key, value in data.items()
        if key not in ("globalWhiteRemoteAddresses", "accounts")
    }
    return AclFile(path, whites, accounts, others)


def write_acl_file(acl_file: AclFile) -> None:
    """Replace the file atomically (comments are lost, as with Java's rewrite). Blocking."""
    text = yaml.safe_dump(acl_file.to_mapping(), sort_keys=False, allow_unicode=True)
    atomic_write(acl_file.path, text.encode("utf-8"), mode=SECRET_FILE_MODE)


# --- the compiled rules ------------------------------------------------------------------


@dataclass(frozen=True)
class Account:
    """An account as the validator checks it."""

    access_key: str
    secret_key: str
    white: AddressPattern
    grants: Grants
    source: Path | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"Account(access_key={self.access_key!r}, source={self.source})"


@dataclass(frozen=True)
class AclRules:
    """Every file's white list and accounts, indexed by accessKey."""

    home: Path
    global_white: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    files: tuple[AclFile, ...] = ()

    def file_holding(self, access_key: str) -> AclFile | None:
        """The file that defines ``access_key`` (where an update must be written)."""
        account = self.accounts.get(access_key)
        for acl_file in self.files:
            if account is not None and acl_file.path == account.source:
                return acl_file
        return None


def build_rules(home: Path, files: Iterable[AclFile]) -> AclRules:
    """Index ``files``: the first definition of an accessKey wins."""
    whites: list[AddressPattern] = []
    accounts: dict[str, Account] = {}
    kept = tuple(files)
    for acl_file in kept:
        whites.extend(
            AddressPattern.compile(text) for text in acl_file.global_white_remote_addresses
        )
        for index, config in enumerate(acl_file.accounts):
            first = accounts.get(config.access_key)
            if first is not None:
                log.warning(
                    "%s: accessKey %s is already defined in %s; keeping that definition",
                    acl_file.path,
                    config.access_key,
                    first.source,
                )
                continue
            where = f"{acl_file.path}: accounts[{index}] (accessKey {config.access_key})"
            accounts[config.access_key] = config.compile(where, acl_file.path)
    return AclRules(home, tuple(whites), accounts, kept)


def load_rules(home: Path) -> AclRules:
    """Read every ACL file under ``home``; AclConfigError when one cannot be used or
    there is none at all. Blocking: call through a worker thread from the event loop."""
    paths = acl_files(home)
    if not paths:
        raise AclConfigError(
            f"aclEnable=true but there is no ACL file: create {home / DEFAULT_FILE} (or files"
            f" under {home / EXTRA_DIR}), or point rocketmqHome (ROCKETMQ_HOME) at the"
            " directory that holds conf/plain_acl.yml"
        )
    files = []
    for path in paths:
        acl_file = read_acl_file(path)
        if acl_file is None:
            log.warning("%s holds no ACL rules; skipping it", path)
            continue
        files.append(acl_file)
    return build_rules(home, files)


def files_state(home: Path) -> dict[Path, tuple[int, int]]:
    """Each ACL file with its modification time (ns) and size: what the watcher compares
    (the size too: two writes within one clock tick share an mtime)."""
    state = {}
    for path in acl_files(home):
        try:
            stat = os.stat(path)
            state[path] = (stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            continue  # removed between the listing and the stat
    return state


# --- reading values ----------------------------------------------------------------------


def _text(value: Any) -> str:
    """A key as text (YAML reads ``12345678`` as a number; Java takes it as text)."""
    if value is None or isinstance(value, bool):
        return ""
    return str(value) if isinstance(value, (str, int)) else ""


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _flag(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{where} must be true or false, not {value!r}")


def _text_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # one entry written without the list dash
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AclConfigError(f"{where} must be a list of strings, not {value!r}")
    return list(value)


def _perm_entry(entry: str, where: str) -> tuple[str, str]:
    """``name=PERM`` -> (name, PERM); exactly one ``=`` and a name."""
    name, equals, perm = entry.partition("=")
    if not equals or "=" in perm or not name.strip() or not perm.strip():
        raise AclConfigError(f"{where}: {entry!r} must be name=PERM, with one '='")
    return name.strip(), perm.strip()
