"""Admin requests to one broker, or to each member of a cluster: its runtime info and
its configuration (GET_BROKER_RUNTIME_INFO, GET/UPDATE_BROKER_CONFIG)."""

from __future__ import annotations

from collections.abc import Mapping

from ...config import format_properties, parse_properties
from ...protocol.bodies import KVTable
from ...protocol.codes import RequestCode
from ..admin_types import AdminError
from .base import AdminBase


class BrokerAdmin(AdminBase):
    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's version, uptime, store offsets, counters."""
        response = await self._broker(
            address, RequestCode.GET_BROKER_RUNTIME_INFO, what="reading the runtime info"
        )
        return KVTable.decode(response.body).table

    async def broker_members(
        self, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[tuple[str, str]]:
        """(broker name, address) of every member, master and slaves, of ``cluster`` (the
        only cluster when None), or of the one broker at ``broker_addr``."""
        if broker_addr is not None:
            return await self._targets(None, broker_addr, what="reading a broker")
        summary = await self.cluster_info()
        if cluster is None:
            if len(summary.clusters) != 1:
                known = ", ".join(summary.clusters) or "none registered"
                raise AdminError(f"name a cluster or a broker address (clusters: {known})")
            cluster = next(iter(summary.clusters))
        if cluster not in summary.clusters:
            known = ", ".join(summary.clusters) or "none"
            raise AdminError(
                f"cluster {cluster!r} is not known to the name server (known: {known})"
            )
        members = []
        for name in summary.clusters[cluster]:
            broker = summary.brokers.get(name)
            for _, address in sorted(broker.addresses.items() if broker else ()):
                members.append((name, address))
        return members

    async def broker_config(self, address: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's effective settings, sorted by key."""
        response = await self._broker(
            address, RequestCode.GET_BROKER_CONFIG, what="reading the broker config"
        )
        return dict(sorted(parse_properties(bytes(response.body or b"").decode()).items()))

    async def update_broker_config(self, address: str, values: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: ``values`` applied to the running broker, all or none;
        the broker refuses an unknown key, a bad value or a key read at startup only."""
        for key, value in values.items():
            if any(c in key or c in value for c in "\r\n") or not key.strip():
                raise AdminError(f"broker config {key!r}={value!r}: no line breaks, no empty key")
        await self._broker(
            address,
            RequestCode.UPDATE_BROKER_CONFIG,
            None,
            format_properties(values).encode(),
            what=f"updating broker config {', '.join(values)}",
        )
