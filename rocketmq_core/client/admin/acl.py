"""Admin requests to a broker's ACL 1.0 files (docs/spec/ACL.md §5): create, update and
delete accounts, replace the global white list, read the files' versions and contents.

Each call goes to one broker (every broker keeps its own files); ``broker_members``
lists a cluster's. With ACL on, the Admin's own requests must be signed: give its
ClientConfig ``credentials`` of any account (these requests need no admin flag).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...protocol import fastjson
from ...protocol.bodies.acl import AclConfigBody, PlainAccessConfig
from ...protocol.bodies.topics import DataVersion
from ...protocol.codes import RequestCode
from ...protocol.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from ..admin_types import AdminError
from .base import AdminBase

__all__ = ["AclAdmin", "AclConfigBody", "AclVersions", "PlainAccessConfig"]


@dataclass(frozen=True)
class AclVersions:
    """GET_BROKER_CLUSTER_ACL_INFO: which broker, and the version of each of its files."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    version: DataVersion  # the default file's
    files: dict[str, DataVersion]  # every loaded file's, by path


class AclAdmin(AdminBase):
    async def update_acl_account(
        self,
        address: str,
        access_key: str,
        secret_key: str,
        *,
        white_remote_address: str | None = None,
        admin: bool = False,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: Sequence[str] | None = None,
        group_perms: Sequence[str] | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create the account, or change it where it is
        defined. None keeps what the file has; ``admin`` is always written (as mqadmin
        does); perms are PUB, SUB, PUB|SUB, SUB|PUB or DENY, entries ``name=PERM``."""
        for key, entries in (("topic_perms", topic_perms), ("group_perms", group_perms)):
            if isinstance(entries, str):
                raise TypeError(f"{key}: give a list of name=PERM entries, not one string")
            if any("," in entry for entry in entries or ()):
                raise AdminError(f"{key}: an entry cannot hold a comma: {list(entries or ())}")
        header = CreateAccessConfigRequestHeader(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=white_remote_address,
            admin=admin,
            default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=None if topic_perms is None else ",".join(topic_perms),
            group_perms=None if group_perms is None else ",".join(group_perms),
        )
        await self._broker(
            address,
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
            header,
            what=f"updating ACL account {access_key}",
        )

    async def delete_acl_account(self, address: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG: remove the account from the file that defines it."""
        await self._broker(
            address,
            RequestCode.DELETE_ACL_CONFIG,
            DeleteAccessConfigRequestHeader(access_key=access_key),
            what=f"deleting ACL account {access_key}",
        )

    async def update_global_white_addrs(
        self, address: str, addresses: Sequence[str], acl_file: str | None = None
    ) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace one file's global white list (the
        default file's unless ``acl_file``, a full path under the broker's home, is given);
        an empty list clears it."""
        if isinstance(addresses, str):
            raise TypeError("addresses: give a list of address patterns, not one string")
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=",".join(addresses), acl_file_full_path=acl_file or ""
        )
        await self._broker(
            address,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            header,
            what="updating the ACL global white list",
        )

    async def acl_versions(self, address: str) -> AclVersions:
        """GET_BROKER_CLUSTER_ACL_INFO: the version of each of the broker's ACL files."""
        response = await self._broker(
            address, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, what="reading the ACL versions"
        )
        header = GetBrokerAclConfigResponseHeader.from_ext_fields(response.ext_fields or {})
        try:
            files = fastjson.loads(header.all_acl_file_version or "{}")
        except ValueError as exc:
            raise AdminError(f"broker {address} sent unreadable ACL versions: {exc}") from None
        return AclVersions(
            header.cluster_name,
            header.broker_name,
            header.broker_addr,
            DataVersion.decode(header.version.encode()),
            {str(path): DataVersion.from_json(value) for path, value in sorted(files.items())},
        )

    async def acl_config(self, address: str) -> AclConfigBody:
        """GET_BROKER_CLUSTER_ACL_CONFIG: the global white list and every account (secrets
        included) the broker's files define."""
        response = await self._broker(
            address, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, what="reading the ACL config"
        )
        return AclConfigBody.decode(response.body or b"{}")
