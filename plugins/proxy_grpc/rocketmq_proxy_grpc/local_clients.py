"""Local mode: 5.x consumers in the broker's own consumer table, one entry per client id,
as Apache's proxy keeps them there (GRPC.md §3.1). Admin tools then list them, and what
an admin asks a consumer through the broker reaches it over its Telemetry stream:

* GET_CONSUMER_RUNNING_INFO with jstackEnable -> PrintThreadStackTraceCommand; the
  client's ThreadStackTrace becomes a ConsumerRunningInfo holding only ``jstack``;
* CONSUME_MESSAGE_DIRECTLY -> VerifyMessageCommand with the stored message; the client's
  VerifyMessageResult becomes a ConsumeMessageDirectlyResult (OK: CR_SUCCESS,
  FAILED_TO_CONSUME_MESSAGE: CR_LATER, MESSAGE_CORRUPTED: CR_RETURN_NULL, else none).

Replies are matched by nonce; one the client leaves unanswered for RELAY_TIMEOUT is
SYSTEM_BUSY, "call remote timeout", as Apache's proxy answers. Only a proxy on the
broker's own event loop registers (a broker on trio runs its proxy in a thread).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from rocketmq_core.protocol.bodies import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketmq_core.protocol.bodies.running import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
)
from rocketmq_core.protocol.codes import OUR_VERSION, LanguageCode, RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocketmq_core.protocol.message import decode_record

from .clients import Client
from .convert import incoming
from .metadata import RequestMetadata
from .status import Code
from .v2 import definition_pb2 as pb
from .v2 import service_pb2 as spb

log = logging.getLogger("rocketmq.proxy")

RELAY_TIMEOUT = 5.0  # s a client has to answer (Apache's grpcProxyRelayRequestTimeoutInSeconds)
_VERIFIED = {
    Code.OK: CMResult.CR_SUCCESS,
    Code.FAILED_TO_CONSUME_MESSAGE: CMResult.CR_LATER,
    Code.MESSAGE_CORRUPTED: CMResult.CR_RETURN_NULL,
}


class Replies:
    """The commands waiting for a client's reply, by nonce."""

    def __init__(self) -> None:
        self._nonces = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Any]] = {}

    def expect(self) -> tuple[str, asyncio.Future[Any]]:
        nonce = str(next(self._nonces))
        future = self._waiting[nonce] = asyncio.get_running_loop().create_future()
        return nonce, future

    def arrived(self, nonce: str, reply: spb.TelemetryCommand) -> None:
        future = self._waiting.pop(nonce, None)
        if future is None:
            log.debug("a reply with nonce %r nobody waits for", nonce)
        elif not future.done():
            future.set_result(reply)

    def forget(self, nonce: str) -> None:
        self._waiting.pop(nonce, None)


class _Unanswered(Exception):
    """The client gave no reply in time (or has no stream to take the command)."""


class GrpcClientChannel:
    """A 5.x client as the broker's consumer table holds it: what the broker relays to it
    (``invoke``, as on a client's connection) goes over its Telemetry stream."""

    def __init__(self, client: Client, replies: Replies, started_ms: int) -> None:
        self.client = client
        self.replies = replies
        self.peer_address = client.client_id
        self.data: ConsumerData | None = None  # what the table holds for it
        self.started_ms = started_ms

    @property
    def closed(self) -> bool:
        """No Telemetry stream open: the broker says the consumer is not online."""
        return not self.client.outboxes

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        try:
            if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                return await self._running_info(request, timeout)
            if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                return await self._verify(request, timeout)
        except _Unanswered:
            return request.response(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        return request.response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f"a gRPC client takes no request {request.code} through the proxy",
        )

    def running_info(self, jstack: str | None = None) -> ConsumerRunningInfo:
        """What the proxy knows of the client: its settings, as a remoting consumer
        reports them (Java's mqadmin reads PROP_CONSUME_TYPE of every answer)."""
        data, settings = self.data, self.client.settings
        return ConsumerRunningInfo(
            properties={
                PROP_CONSUME_TYPE: data.consume_type.name if data else "",
                PROP_CONSUMER_START_TIMESTAMP: str(self.started_ms),
                PROP_CONSUME_ORDERLY: "true" if settings.subscription.fifo else "false",
                PROP_CLIENT_VERSION: settings.user_agent.version,
            },
            subscription_set=data.subscriptions if data else [],
            jstack=jstack,
        )

    async def _running_info(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        if request.ext_fields.get("jstackEnable", "").lower() != "true":
            # Apache's proxy sends the client nothing then, and the admin times out
            return request.response(body=self.running_info().encode())
        code, reply = await self._ask(
            timeout,
            lambda nonce: spb.TelemetryCommand(
                print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
            ),
        )
        if code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return request.response(ResponseCode.NO_PERMISSION, "forbidden to verify message")
        if code != Code.OK:
            return request.response(ResponseCode.SYSTEM_ERROR, "verify message failed")
        info = self.running_info(jstack=reply.thread_stack_trace.thread_stack_trace)
        return request.response(body=info.encode())

    async def _verify(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        stored = decode_record(request.body)
        message = incoming(stored, stored.topic)
        code, _ = await self._ask(
            timeout,
            lambda nonce: spb.TelemetryCommand(
                verify_message_command=spb.VerifyMessageCommand(nonce=nonce, message=message)
            ),
        )
        result = ConsumeMessageDirectlyResult(
            consume_result=_VERIFIED.get(code), remark="from gRPC client"
        )
        return request.response(body=result.encode())

    async def _ask(self, timeout: float, command: Any) -> tuple[pb.Code, spb.TelemetryCommand]:
        """Send the client ``command(nonce)`` on its newest stream; the status code and
        the reply, or _Unanswered when none came within RELAY_TIMEOUT (or ``timeout``)."""
        if not self.client.outboxes:
            raise _Unanswered
        nonce, future = self.replies.expect()
        try:
            self.client.outboxes[-1].put_nowait(command(nonce))
            reply = await asyncio.wait_for(future, min(RELAY_TIMEOUT, timeout))
        except TimeoutError:
            raise _Unanswered from None
        finally:
            self.replies.forget(nonce)
        return (reply.status.code if reply.HasField("status") else Code.OK), reply


class LocalConsumers:
    """The 5.x consumers of a local-mode proxy, in its broker's consumer table."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.replies = Replies()
        self._channels: dict[str, GrpcClientChannel] = {}

    def register(self, client: Client, meta: RequestMetadata, peer: str) -> None:
        """The client's settings (or a heartbeat): in the table, or refreshed there; off
        it when it no longer subscribes, and out of a group it left."""
        now = self.broker.now()
        data = consumer_data(client, sub_version=int(now))
        channel = self._channels.get(client.client_id)
        if channel is not None and (channel.client is not client or data is None):
            self.unregister(channel.client)
            channel = None
        if data is None:
            return
        if channel is None:
            channel = GrpcClientChannel(client, self.replies, int(now))
            self._channels[client.client_id] = channel
        if channel.data is not None and channel.data.group_name != data.group_name:
            self.broker.consumers.unregister(channel.data.group_name, channel)
        channel.data, channel.peer_address = data, peer
        self.broker.consumers.register(
            data,
            channel,
            client.client_id,
            now,
            language=_language(meta.language),
            version=OUR_VERSION,  # as Apache's proxy registers a version it cannot parse
        )

    def unregister(self, client: Client) -> None:
        channel = self._channels.pop(client.client_id, None)
        if channel is not None and channel.data is not None:
            self.broker.consumers.unregister(channel.data.group_name, channel)

    def close(self) -> None:
        """The proxy stops: its clients leave the broker's table now, not at expiry."""
        for channel in list(self._channels.values()):
            self.unregister(channel.client)


def _language(name: str) -> str:
    """A client's x-mq-language as the broker's table names languages (Go's as GO)."""
    name = {"GOLANG": "GO", "NODEJS": "NODE_JS", "CSHARP": "DOTNET"}.get(name.upper(), name.upper())
    return name if name in LanguageCode.__members__ else "OTHER"


def consumer_data(client: Client, sub_version: int = 0) -> ConsumerData | None:
    """How the broker's table holds a subscribing client (Apache's proxy: a push consumer
    consumes passively, a simple consumer actively; clustering; from the last offset)."""
    settings = client.settings
    if settings.WhichOneof("pub_sub") != "subscription":
        return None
    subscriptions = []
    for entry in settings.subscription.subscriptions:
        topic, expression = entry.topic.name, entry.expression.expression or "*"
        if entry.expression.type == pb.SQL:  # no tags to read in it
            subscriptions.append(
                SubscriptionData(
                    topic, expression, sub_version=sub_version, expression_type="SQL92"
                )
            )
        else:  # the version stamps a change of filter, as Java's FilterAPI does
            subscriptions.append(SubscriptionData.of(topic, expression, sub_version))
    push = settings.client_type == pb.PUSH_CONSUMER
    return ConsumerData(
        settings.subscription.group.name,
        ConsumeType.CONSUME_PASSIVELY if push else ConsumeType.CONSUME_ACTIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscriptions,
    )
