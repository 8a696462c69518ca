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
from rocketmq_core.protocol.codes import OUR_VERSION, RequestCode, ResponseCode
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


class GrpcClientChannel:
    """A 5.x client as the broker's consumer table holds it: what the broker relays to it
    (``invoke``, as on a client's connection) goes over its Telemetry stream."""

    def __init__(self, client: Client, replies: Replies) -> None:
        self.client = client
        self.replies = replies
        self.peer_address = client.client_id

    @property
    def closed(self) -> bool:
        """No Telemetry stream open: the broker says the consumer is not online."""
        return not self.client.outboxes

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return await self._running_info(request, timeout)
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return await self._verify(request, timeout)
        return request.response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f"a gRPC client takes no request {request.code} through the proxy",
        )

    async def _running_info(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        if request.ext_fields.get("jstackEnable") != "true":
            # Apache's proxy sends nothing then (the admin waits out its timeout); the
            # proxy knows no more of a gRPC client than its table shows
            return request.response(body=ConsumerRunningInfo().encode())
        reply = await self._ask(
            timeout,
            lambda nonce: spb.TelemetryCommand(
                print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
            ),
        )
        if reply is None:
            return request.response(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        code = reply.status.code if reply.HasField("status") else Code.OK
        if code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return request.response(ResponseCode.NO_PERMISSION, "forbidden to verify message")
        if code != Code.OK:
            return request.response(ResponseCode.SYSTEM_ERROR, "verify message failed")
        info = ConsumerRunningInfo(jstack=reply.thread_stack_trace.thread_stack_trace)
        return request.response(body=info.encode())

    async def _verify(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        stored = decode_record(request.body)
        message = incoming(stored, stored.topic)
        reply = await self._ask(
            timeout,
            lambda nonce: spb.TelemetryCommand(
                verify_message_command=spb.VerifyMessageCommand(nonce=nonce, message=message)
            ),
        )
        if reply is None:
            return request.response(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        code = reply.status.code if reply.HasField("status") else Code.OK
        result = ConsumeMessageDirectlyResult(
            consume_result=_VERIFIED.get(code), remark="from gRPC client"
        )
        return request.response(body=result.encode())

    async def _ask(self, timeout: float, command: Any) -> spb.TelemetryCommand | None:
        """Send the client ``command(nonce)`` on its newest stream; its reply, or None
        when it gave none within RELAY_TIMEOUT (or ``timeout``, if shorter)."""
        if not self.client.outboxes:
            return None
        nonce, future = self.replies.expect()
        try:
            self.client.outboxes[-1].put_nowait(command(nonce))
            return await asyncio.wait_for(future, min(RELAY_TIMEOUT, timeout))
        except TimeoutError:
            return None
        finally:
            self.replies.forget(nonce)


class LocalConsumers:
    """The 5.x consumers of a local-mode proxy, in its broker's consumer table."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.replies = Replies()
        self._channels: dict[str, GrpcClientChannel] = {}

    def register(self, client: Client, meta: RequestMetadata, peer: str) -> None:
        """The client's settings (or a heartbeat): in the table, or refreshed there."""
        data = consumer_data(client)
        if data is None:
            return
        channel = self._channels.get(client.client_id)
        if channel is None or channel.client is not client:
            channel = self._channels[client.client_id] = GrpcClientChannel(client, self.replies)
        channel.peer_address = peer
        self.broker.consumers.register(
            data,
            channel,
            client.client_id,
            self.broker.now(),
            language=meta.language.upper() or "OTHER",
            version=OUR_VERSION,  # as Apache's proxy registers a version it cannot parse
        )

    def unregister(self, client: Client) -> None:
        channel = self._channels.pop(client.client_id, None)
        group = client.group
        if channel is not None and group:
            self.broker.consumers.unregister(group, channel)


def consumer_data(client: Client) -> ConsumerData | None:
    """How the broker's table holds a subscribing client (Apache's proxy: a push consumer
    consumes passively, a simple consumer actively; clustering; from the last offset)."""
    settings = client.settings
    if settings.WhichOneof("pub_sub") != "subscription":
        return None
    subscriptions = []
    for entry in settings.subscription.subscriptions:
        topic, expression = entry.topic.name, entry.expression.expression or "*"
        if entry.expression.type == pb.SQL:  # no tags to read in it
            subscriptions.append(SubscriptionData(topic, expression, expression_type="SQL92"))
        else:
            subscriptions.append(SubscriptionData.of(topic, expression))
    push = settings.client_type == pb.PUSH_CONSUMER
    return ConsumerData(
        settings.subscription.group.name,
        ConsumeType.CONSUME_PASSIVELY if push else ConsumeType.CONSUME_ACTIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscriptions,
    )
