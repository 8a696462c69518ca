"""Admin requests on subscription groups: list, create, change, delete and read their
config on the brokers (the *_SUBSCRIPTIONGROUP requests)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ...protocol.bodies import SubscriptionGroupWrapper
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
)
from ..admin_types import GroupConfig, GroupInfo
from .base import AdminBase


class GroupAdmin(AdminBase):
    async def list_groups(self) -> list[GroupInfo]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG from every master, merged by group name."""
        groups: dict[str, GroupInfo] = {}
        for name, address in await self._masters():
            response = await self._broker(
                address,
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                what=f"listing subscription groups on {name}",
            )
            table = SubscriptionGroupWrapper.decode(response.body).subscription_group_table
            for group, config in table.items():
                info = groups.get(group)
                if info is None:
                    info = groups[group] = GroupInfo(config)
                info.brokers.append(name)
        return [groups[group] for group in sorted(groups)]

    async def create_group(
        self,
        group: str | GroupConfig,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on every master of ``cluster`` (or on one
        broker); ``group`` is a name (the defaults) or a whole GroupConfig."""
        config = group if isinstance(group, GroupConfig) else GroupConfig(group)
        what = f"creating subscription group {config.group_name!r}"
        targets = await self._targets(cluster, broker_addr, what=what)
        body = config.encode()
        for name, address in targets:
            await self._broker(
                address,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                body,
                what=f"{what} on {name}",
            )
        return [address for _, address in targets]

    update_group = create_group

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        clean_offset: bool = True,
    ) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP (and its committed offsets unless ``clean_offset``
        is False) on every master of ``cluster`` or on one broker."""
        what = f"deleting subscription group {group!r}"
        targets = await self._targets(cluster, broker_addr, what=what)
        header = DeleteSubscriptionGroupRequestHeader(group_name=group, clean_offset=clean_offset)
        for name, address in targets:
            await self._broker(
                address, RequestCode.DELETE_SUBSCRIPTIONGROUP, header, what=f"{what} on {name}"
            )
        return [address for _, address in targets]

    async def group_config(self, address: str, group: str) -> GroupConfig | None:
        """The subscription group ``group`` as the broker at ``address`` holds it; None
        when it has none (GET_SUBSCRIPTIONGROUP_CONFIG, else the whole table)."""
        response = await self._broker(
            address,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
            GetSubscriptionGroupConfigRequestHeader(group=group),
            what=f"reading subscription group {group!r}",
            accept=(
                ResponseCode.SUCCESS,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            ),
        )
        if response.code == ResponseCode.SUCCESS:
            return GroupConfig.decode(response.body)
        if response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            return None
        # a 4.x broker predates the one-group request: read the table
        response = await self._broker(
            address,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            what=f"reading subscription group {group!r}",
        )
        table = SubscriptionGroupWrapper.decode(response.body).subscription_group_table
        return table.get(group)

    async def configure_group(
        self,
        group: str,
        changes: Mapping[str, Any],
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> dict[str, GroupConfig]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on every master of ``cluster`` (or on one
        broker): ``changes`` (GroupConfig field names) applied to what each broker holds,
        the defaults for a new group. Returns the config written, by broker address."""
        what = f"updating subscription group {group!r}"
        written: dict[str, GroupConfig] = {}
        for name, address in await self._targets(cluster, broker_addr, what=what):
            current = await self.group_config(address, group) or GroupConfig(group)
            config = dataclasses.replace(current, **changes)
            await self._broker(
                address,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                config.encode(),
                what=f"{what} on {name}",
            )
            written[address] = config
        return written
