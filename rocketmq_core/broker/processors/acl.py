"""The ACL admin family (docs/spec/ACL.md §5): accounts and global white lists changed
in the broker's plain_acl.yml files, their versions and contents read back.

A change is written by a worker thread, one change at a time per broker, and the rules
are reloaded before the answer, so the next request is checked against them. With ACL
off there is nothing to change: the changes answer their fail code, the reads
SYSTEM_ERROR (Java, whose validator is then missing, answers the reads with silence).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ...acl import admin_requests
from ...acl.admin_requests import AccountUpdate, AclAdminError
from ...acl.rules import AclRules
from ...errors import RequestRefused
from ...protocol import fastjson
from ...protocol.codes import ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

if TYPE_CHECKING:
    from ...acl.service import AclService
    from ...remoting.processor import RequestContext
    from ..app import Broker

log = logging.getLogger("rocketmq.broker")

ACL_OFF = (
    "The broker does not enable acl: set aclEnable=true in its config, with"
    " conf/plain_acl.yml under rocketmqHome, and restart it"
)
# one change at a time per broker (Java's handlers are synchronized)
_change_locks: weakref.WeakKeyDictionary[AclService, anyio.Lock] = weakref.WeakKeyDictionary()


async def update_and_create_acl_config(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    header = CreateAccessConfigRequestHeader.from_ext_fields(request.ext_fields or {})
    update = AccountUpdate(
        access_key=header.access_key,
        secret_key=header.secret_key,
        white_remote_address=header.white_remote_address,
        admin=header.admin,
        default_topic_perm=header.default_topic_perm,
        default_group_perm=header.default_group_perm,
        topic_perms=_split(header.topic_perms),
        group_perms=_split(header.group_perms),
    )

    def change(rules: AclRules) -> Path:
        return admin_requests.update_account(rules, update, _now_ms())

    await _change(
        broker,
        change,
        ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
        f"account {header.access_key}",
    )
    return request.response()


async def delete_acl_config(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    header = DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields or {})

    def change(rules: AclRules) -> Path:
        return admin_requests.delete_account(rules, header.access_key, _now_ms())

    await _change(
        broker,
        change,
        ResponseCode.DELETE_ACL_CONFIG_FAILED,
        f"deleted account {header.access_key}",
    )
    return request.response()


async def update_global_white_addrs_config(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    header = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(request.ext_fields or {})
    addresses = _split(header.global_white_addrs) or []

    def change(rules: AclRules) -> Path:
        return admin_requests.update_global_white(
            rules, addresses, header.acl_file_full_path, _now_ms()
        )

    await _change(
        broker, change, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, "global white list"
    )
    return request.response()


async def get_broker_cluster_acl_info(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    acl = _enabled(broker, ResponseCode.SYSTEM_ERROR)
    default, by_path = await anyio.to_thread.run_sync(admin_requests.versions, acl.rules)
    header = GetBrokerAclConfigResponseHeader(
        version=default.encode().decode(),
        all_acl_file_version=fastjson.dumps(
            {path: version.to_json() for path, version in by_path.items()}
        ).decode(),
        broker_name=broker.config.broker_name,
        broker_addr=broker.address or "",
        cluster_name=broker.config.broker_cluster_name,
    )
    return request.response(ext_fields=header.to_ext_fields())


def get_broker_cluster_acl_config(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    acl = _enabled(broker, ResponseCode.SYSTEM_ERROR)
    return request.response(body=admin_requests.acl_config(acl.rules).encode())


async def _change(
    broker: Broker, change: Callable[[AclRules], Path], fail_code: int, what: str
) -> None:
    """Write ``change`` with the rules in force, then reload them; RequestRefused with
    ``fail_code`` when the files cannot take it."""
    acl = _enabled(broker, fail_code)
    lock = _change_locks.setdefault(acl, anyio.Lock())
    async with lock:
        try:
            path = await anyio.to_thread.run_sync(change, acl.rules)
        except AclAdminError as exc:
            log.warning("ACL change refused: %s", exc)
            raise RequestRefused(fail_code, str(exc)) from None
        log.info("ACL %s written to %s", what, path)
        if not await acl.reload():
            raise RequestRefused(
                fail_code,
                f"{what} was written to {path}, but the ACL files do not load now (the broker"
                " log says why); the rules in force stay until the files are fixed",
            )


def _enabled(broker: Broker, fail_code: int) -> AclService:
    if broker.acl is None:
        raise RequestRefused(fail_code, ACL_OFF)
    return broker.acl


def _split(joined: str | None) -> list[str] | None:
    """A comma-joined list, entries trimmed, blanks dropped; None stays None."""
    if joined is None:
        return None
    return [entry.strip() for entry in joined.split(",") if entry.strip()]


def _now_ms() -> int:
    return int(time.time() * 1000)
