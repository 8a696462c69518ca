"""GET_BROKER_CLUSTER_ACL_CONFIG's body: the broker's global white list and its accounts,
secrets in clear, as Java's GetBrokerClusterAclConfigResponseBody (ACL.md §5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import fastjson
from ..json_body import body_decoder, load_object


@dataclass(slots=True)
class PlainAccessConfig:
    """One account as the wire carries it (Java's PlainAccessConfig)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] = field(default_factory=list)
    group_perms: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # never print the secret
        return f"PlainAccessConfig(access_key={self.access_key!r}, admin={self.admin})"

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "accessKey": self.access_key,
            "admin": self.admin,
            "groupPerms": self.group_perms,
            "topicPerms": self.topic_perms,
        }
        for key, item in (
            ("secretKey", self.secret_key),
            ("whiteRemoteAddress", self.white_remote_address),
            ("defaultTopicPerm", self.default_topic_perm),
            ("defaultGroupPerm", self.default_group_perm),
        ):
            if item is not None:
                value[key] = item
        return value

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> PlainAccessConfig:
        def text(key: str) -> str | None:
            item = value.get(key)
            return None if item is None else str(item)

        return cls(
            access_key=str(value.get("accessKey") or ""),
            secret_key=text("secretKey"),
            white_remote_address=text("whiteRemoteAddress"),
            admin=value.get("admin") is True or str(value.get("admin")).lower() == "true",
            default_topic_perm=text("defaultTopicPerm"),
            default_group_perm=text("defaultGroupPerm"),
            topic_perms=[str(entry) for entry in value.get("topicPerms") or []],
            group_perms=[str(entry) for entry in value.get("groupPerms") or []],
        )


@dataclass(slots=True)
class AclConfigBody:
    global_white_addrs: list[str] = field(default_factory=list)
    plain_access_configs: list[PlainAccessConfig] = field(default_factory=list)

    def encode(self) -> bytes:
        return fastjson.dumps(
            {
                "globalWhiteAddrs": self.global_white_addrs,
                "plainAccessConfigs": [config.to_json() for config in self.plain_access_configs],
            }
        )

    @classmethod
    @body_decoder("ACL config")
    def decode(cls, data: bytes) -> AclConfigBody:
        value = load_object(data, "ACL config")
        return cls(
            [str(address) for address in value.get("globalWhiteAddrs") or []],
            [PlainAccessConfig.from_json(entry) for entry in value.get("plainAccessConfigs") or []],
        )
