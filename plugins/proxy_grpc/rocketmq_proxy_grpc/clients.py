"""The 5.x clients the proxy knows: their Settings (sent first on the Telemetry stream)
and each stream's outbox, for commands the proxy sends them (GRPC.md §3)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from google.protobuf.duration_pb2 import Duration

from .status import Code, ProxyError
from .v2 import definition_pb2 as pb
from .v2 import service_pb2 as spb

MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # maxMessageSize: what a producer may send
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_TIMEOUT_S = 20
CONSUMER_MAX_ATTEMPTS = 17  # retryMaxTimes 16, plus the first delivery
# the delays of a group's retries (RocketMQ's customized policy, by attempt)
CUSTOMIZED_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800)


@dataclass
class Client:
    client_id: str
    settings: pb.Settings
    outboxes: list[asyncio.Queue[spb.TelemetryCommand]] = field(default_factory=list)

    @property
    def topics(self) -> list[str]:
        if self.settings.WhichOneof("pub_sub") != "publishing":
            return []
        return [topic.name for topic in self.settings.publishing.topics]

    @property
    def group(self) -> str | None:
        if self.settings.WhichOneof("pub_sub") != "subscription":
            return None
        return self.settings.subscription.group.name


def merged_settings(settings: pb.Settings) -> pb.Settings:
    """What the proxy answers: the client's settings with the server's limits and
    retry policy in them; ProxyError for settings that neither publish nor subscribe."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    kind = settings.WhichOneof("pub_sub")
    if kind == "publishing":
        merged.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=3,
                exponential_backoff=pb.ExponentialBackoff(
                    initial=Duration(nanos=10_000_000), max=Duration(seconds=1), multiplier=2
                ),
            )
        )
        merged.publishing.max_body_size = MAX_MESSAGE_SIZE
        merged.publishing.validate_message_type = True
    elif kind == "subscription":
        merged.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=CONSUMER_MAX_ATTEMPTS,
                customized_backoff=pb.CustomizedBackoff(
                    next=[Duration(seconds=s) for s in CUSTOMIZED_BACKOFF_S]
                ),
            )
        )
        merged.subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        merged.subscription.long_polling_timeout.CopyFrom(Duration(seconds=LONG_POLLING_TIMEOUT_S))
        if not merged.subscription.HasField("fifo"):
            merged.subscription.fifo = False
    else:
        raise ProxyError(Code.BAD_REQUEST, "the settings neither publish nor subscribe")
    merged.metric.CopyFrom(pb.Metric(on=False))
    return merged


class ClientRegistry:
    """Clients by id; one proxy event loop uses it (no locks)."""

    def __init__(self) -> None:
        self._clients: dict[str, Client] = {}

    def get(self, client_id: str) -> Client | None:
        return self._clients.get(client_id)

    def update(self, client_id: str, settings: pb.Settings) -> Client:
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = Client(client_id, settings)
        else:
            client.settings = settings
        return client

    def remove(self, client_id: str) -> Client | None:
        return self._clients.pop(client_id, None)

    def publishers_of(self, topic: str) -> list[Client]:
        """Clients publishing ``topic`` with an open Telemetry stream."""
        return [c for c in self._clients.values() if topic in c.topics and c.outboxes]

    def __len__(self) -> int:
        return len(self._clients)
