"""Admin requests to the name servers' KV config (PUT/GET/DELETE_KV_CONFIG,
GET_KVLIST_BY_NAMESPACE): writes go to every name server, reads to the first that
answers."""

from __future__ import annotations

from ...protocol.bodies import KVTable
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.headers import (
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    KVConfigKeyRequestHeader,
    PutKVConfigRequestHeader,
)
from .base import AdminBase


class KVConfigAdmin(AdminBase):
    async def put_kv(self, namespace: str, key: str, value: str) -> None:
        await self._every_namesrv(
            RequestCode.PUT_KV_CONFIG,
            PutKVConfigRequestHeader(namespace=namespace, key=key, value=value),
            what=f"putting {namespace}/{key}",
        )

    async def get_kv(self, namespace: str, key: str) -> str | None:
        """The value, None when the name server has no such item."""
        response = await self._namesrv(
            RequestCode.GET_KV_CONFIG,
            KVConfigKeyRequestHeader(namespace=namespace, key=key),
            what=f"reading {namespace}/{key}",
            accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return GetKVConfigResponseHeader.from_ext_fields(response.ext_fields or {}).value

    async def delete_kv(self, namespace: str, key: str) -> None:
        await self._every_namesrv(
            RequestCode.DELETE_KV_CONFIG,
            KVConfigKeyRequestHeader(namespace=namespace, key=key),
            what=f"deleting {namespace}/{key}",
        )

    async def kv_list(self, namespace: str) -> dict[str, str]:
        """Every item of ``namespace`` (empty when there is none)."""
        response = await self._namesrv(
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            GetKVListByNamespaceRequestHeader(namespace=namespace),
            what=f"listing namespace {namespace}",
            accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS or not response.body:
            return {}
        return dict(sorted(KVTable.decode(response.body).table.items()))
