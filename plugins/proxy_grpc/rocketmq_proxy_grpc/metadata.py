"""The x-mq-* metadata every 5.x client sends, and its signature (GRPC.md §2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
DATE_TIME = "x-mq-date-time"
AUTHORIZATION = "authorization"
ALGORITHM = "MQv2-HMAC-SHA1"


@dataclass(frozen=True, slots=True)
class RequestMetadata:
    client_id: str
    language: str
    version: str
    namespace: str
    date_time: str
    authorization: str

    @classmethod
    def of(cls, context: Any) -> RequestMetadata:
        pairs = {key: value for key, value in (context.invocation_metadata() or ())}
        return cls(
            client_id=pairs.get(CLIENT_ID, ""),
            language=pairs.get(LANGUAGE, ""),
            version=pairs.get(CLIENT_VERSION, ""),
            namespace=pairs.get(NAMESPACE, ""),
            date_time=pairs.get(DATE_TIME, ""),
            authorization=pairs.get(AUTHORIZATION, ""),
        )

    def credential(self) -> tuple[str, str] | None:
        """(access key, hex signature) of the Authorization value, or None without one:
        ``MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=hex``."""
        algorithm, _, rest = self.authorization.partition(" ")
        if algorithm != ALGORITHM:
            return None
        fields = dict(part.strip().partition("=")[::2] for part in rest.split(","))
        access_key = fields.get("Credential", "").split("/", 1)[0]
        signature = fields.get("Signature", "")
        if not access_key or not signature:
            return None
        return access_key, signature
