"""MessagingService: each RPC of RocketMQ 5's gRPC protocol answered by asking the
brokers over remoting, with rocketmq-py's SDK (RocketMQ's CLUSTER proxy mode).

Producing and client life are here; consuming (POP) is in ``consume.py``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import unquote

import anyio
import grpc

from rocketmq_core.acl.permissions import PUB
from rocketmq_core.client.instance import ClientInstance
from rocketmq_core.errors import RemotingTimeoutError, ResponseError
from rocketmq_core.protocol.bodies import SubscriptionGroupConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import DEFAULT_TOPIC, MASTER_ID
from rocketmq_core.protocol.headers import (
    SEND_V2_NAMES,
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from rocketmq_core.protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
    decode_offset_msg_id,
    encode_properties,
)
from rocketmq_core.protocol.recall import RecallHandle
from rocketmq_core.remoting.local_call import answer_locally

from . import routes
from .acl import GrpcAclVerifier, consume, publish
from .clients import Client, ClientRegistry, merged_settings
from .consume import Consuming
from .convert import OutgoingMessage, incoming, outgoing
from .local_clients import LocalConsumers
from .metadata import RequestMetadata
from .status import OK, Code, ProxyError, status, status_of
from .transactions import TransactionRecord, TransactionTable
from .v2 import definition_pb2 as pb
from .v2 import service_pb2 as spb
from .v2 import service_pb2_grpc

log = logging.getLogger("rocketmq.proxy")


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    """One per proxy; every call runs on the proxy's asyncio loop."""

    def __init__(
        self,
        instance: ClientInstance,
        endpoints: pb.Endpoints,
        verifier: GrpcAclVerifier | None = None,
        peer_of: Callable[[str], str] | None = None,
        local: LocalConsumers | None = None,
    ) -> None:
        self.instance = instance
        # local mode on the broker's loop: consumers go in the broker's own table
        self.local = local
        # gRPC's peer of a call -> the client's host:port (a TLS front knows it)
        self.peer_of = peer_of or peer_host
        self.endpoints = endpoints  # where clients reach this proxy when they do not say
        self.clients = ClientRegistry()
        self.transactions = TransactionTable()
        self.verifier = verifier  # checks the signed metadata when ACL is on
        self.consuming = Consuming(self)
        self._round_robin = 0

    def metadata(
        self, context: grpc.aio.ServicerContext, needed: Mapping[str, int] | None = None
    ) -> RequestMetadata:
        """The caller's metadata, verified against the ACL (signature, then the ``needed``
        permissions on topics and groups); ProxyError when it may not call."""
        meta = RequestMetadata.of(context)
        if not meta.client_id:
            raise ProxyError(Code.CLIENT_ID_REQUIRED, "the request has no x-mq-client-id")
        peer = self.peer_of(context.peer())  # a TLS front refuses calls it did not relay
        if self.verifier is not None:
            self.verifier.verify(meta, peer, needed or {})
        return meta

    # --- routes --------------------------------------------------------------------

    async def QueryRoute(self, request: spb.QueryRouteRequest, context: Any) -> Any:
        try:
            self.metadata(context)
            route = await self.route(request.topic.name)
        except Exception as exc:
            return spb.QueryRouteResponse(status=status_of(exc))
        # clients reach the brokers where they reached the proxy (CLUSTER mode)
        endpoints = request.endpoints if request.endpoints.addresses else self.endpoints
        queues = routes.message_queues(request.topic, route, endpoints)
        if not queues:
            return spb.QueryRouteResponse(
                status=status(Code.TOPIC_NOT_FOUND, f"topic {request.topic.name!r} has no queue")
            )
        return spb.QueryRouteResponse(status=OK, message_queues=queues)

    async def route(self, topic: str) -> Any:
        if not topic:
            raise ProxyError(Code.ILLEGAL_TOPIC, "the request names no topic")
        try:
            return await self.instance.topic_route(topic)
        except ResponseError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist") from None
            raise

    async def master_address(self, topic: str, broker_name: str) -> str:
        await self.route(topic)
        address = self.instance.master_address(broker_name)
        if address is None:
            await self.instance.topic_route(topic, refresh=True)
            address = self.instance.master_address(broker_name)
        if address is None:
            raise ProxyError(
                Code.NOT_FOUND, f"broker {broker_name!r} of topic {topic!r} has no master"
            )
        return address

    async def QueryAssignment(self, request: spb.QueryAssignmentRequest, context: Any) -> Any:
        """One assignment per master broker, queue id -1 (the broker picks the queue)."""
        try:
            self.metadata(context, consume(request.topic.name, request.group.name))
            route = await self.route(request.topic.name)
        except Exception as exc:
            return spb.QueryAssignmentResponse(status=status_of(exc))
        endpoints = request.endpoints if request.endpoints.addresses else self.endpoints
        readable: dict[str, pb.MessageQueue] = {}
        for queue in routes.message_queues(request.topic, route, endpoints):
            if queue.permission in (pb.READ, pb.READ_WRITE):
                readable.setdefault(queue.broker.name, queue)
        if not readable:
            return spb.QueryAssignmentResponse(
                status=status(Code.FORBIDDEN, f"no broker serves reads of {request.topic.name!r}")
            )
        assignments = []
        for queue in readable.values():
            assigned = pb.MessageQueue()
            assigned.CopyFrom(queue)
            assigned.id = -1
            assignments.append(pb.Assignment(message_queue=assigned))
        return spb.QueryAssignmentResponse(status=OK, assignments=assignments)

    # --- client life ---------------------------------------------------------------

    async def Heartbeat(self, request: spb.HeartbeatRequest, context: Any) -> Any:
        try:
            meta = self.metadata(context)
        except ProxyError as exc:
            return spb.HeartbeatResponse(status=exc.status)
        client = self.clients.get(meta.client_id)
        if client is None:
            return spb.HeartbeatResponse(
                status=status(
                    Code.UNRECOGNIZED_CLIENT_TYPE,
                    "no settings from this client yet: open the Telemetry stream first",
                )
            )
        if self.local is not None:  # still there: before the broker's channel expiry
            self.local.register(client, meta, self.peer_of(context.peer()))
        return spb.HeartbeatResponse(status=OK)

    async def NotifyClientTermination(
        self, request: spb.NotifyClientTerminationRequest, context: Any
    ) -> Any:
        try:
            meta = self.metadata(context)
        except ProxyError as exc:
            return spb.NotifyClientTerminationResponse(status=exc.status)
        client = self.clients.remove(meta.client_id)
        if client is not None:
            self._forget_publisher(client)
            if self.local is not None:
                self.local.unregister(client)
        self.consuming.renewals.forget_client(meta.client_id)
        return spb.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Settings first (answered with the merged settings), then whatever the client
        reports; commands for the client (transaction checks) go out on the same stream."""
        try:
            meta = self.metadata(context)
        except ProxyError as exc:  # a client applies no reply without status OK
            yield spb.TelemetryCommand(status=exc.status)
            return
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        client: Client | None = None
        peer = self.peer_of(context.peer())
        reader = asyncio.ensure_future(self._read_telemetry(meta, peer, request_iterator, outbox))
        try:
            while True:
                getter = asyncio.ensure_future(outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    break
                command = getter.result()
                if isinstance(command, ProxyError):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, command.message)
                if isinstance(command, Client):  # the stream's settings are in
                    client = command
                    if outbox not in client.outboxes:
                        client.outboxes.append(outbox)
                    self._register_publisher(client)
                    continue
                yield command
        finally:
            reader.cancel()
            if client is not None and outbox in client.outboxes:
                client.outboxes.remove(outbox)

    async def _read_telemetry(
        self, meta: RequestMetadata, peer: str, request_iterator: Any, outbox: asyncio.Queue[Any]
    ) -> None:
        async for command in request_iterator:
            which = command.WhichOneof("command")
            if which == "settings":
                try:
                    merged = merged_settings(command.settings)
                except ProxyError as exc:
                    outbox.put_nowait(exc)
                    return
                if merged.WhichOneof("pub_sub") == "subscription":
                    merged.subscription.fifo = await self._orderly(merged.subscription)
                client = self.clients.update(meta.client_id, merged)
                outbox.put_nowait(client)
                outbox.put_nowait(spb.TelemetryCommand(status=OK, settings=merged))
                if self.local is not None:
                    self.local.register(client, meta, peer)
            elif which in ("thread_stack_trace", "verify_message_result"):
                if self.local is not None:  # the reply to a command a broker relayed
                    self.local.replies.arrived(getattr(command, which).nonce, command)
            elif which is not None:
                log.debug("client %s reported %s", meta.client_id, which)

    async def _orderly(self, subscription: pb.Subscription) -> bool:
        """Whether the group consumes in order (its consumeMessageOrderly), as a master
        of its first topic holds it; False when no broker says."""
        topics = [entry.topic.name for entry in subscription.subscriptions]
        try:
            route = await self.route(topics[0]) if topics else None
        except Exception:
            return False
        for broker in route.broker_datas if route is not None else ():
            address = broker.broker_addrs.get(MASTER_ID)
            if address is None:
                continue
            try:
                response = await self.instance.invoke(
                    address,
                    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                    GetSubscriptionGroupConfigRequestHeader(group=subscription.group.name),
                )
            except Exception:
                continue
            return SubscriptionGroupConfig.decode(response.body).consume_message_orderly
        return False

    def fifo(self, client_id: str) -> bool:
        """Whether the client's group consumes in order, as its settings say."""
        client = self.clients.get(client_id)
        if client is None or client.settings.WhichOneof("pub_sub") != "subscription":
            return False
        return client.settings.subscription.fifo

    # --- producing -----------------------------------------------------------------

    async def SendMessage(self, request: spb.SendMessageRequest, context: Any) -> Any:
        try:
            meta = self.metadata(context, {m.topic.name: PUB for m in request.messages})
            if not request.messages:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "the request carries no message")
            peer = self.peer_of(context.peer())
            entries = [
                await self._send_one(outgoing(m, peer), meta, peer) for m in request.messages
            ]
        except Exception as exc:
            return spb.SendMessageResponse(status=status_of(exc))
        codes = {entry.status.code for entry in entries}
        top = entries[0].status if len(codes) == 1 else status(Code.MULTIPLE_RESULTS, "mixed")
        return spb.SendMessageResponse(status=top, entries=entries)

    async def call_broker(
        self, address: str, command: RemotingCommand, peer: str | None = None
    ) -> RemotingCommand:
        """The broker at ``address``'s answer to a request for the client at ``peer``
        (None: the proxy's own); ResponseError unless SUCCESS. In local mode this
        process's own broker is called (a send processor sees the client as the sender),
        not sent a remoting request over loopback (grpc-send: a fifth of the broker's CPU
        a message)."""
        local = self.local
        if local is None or address != local.broker.address or local.broker.server is None:
            return await self.instance.invoke_command(address, command)
        processors = local.broker.server.processors
        answer = answer_locally(processors, command, peer or address, address)
        if not isinstance(answer, RemotingCommand):  # answered later: as remoting waits
            timeout = self.instance.config.request_timeout
            with anyio.move_on_after(timeout):
                answer = await answer
            if not isinstance(answer, RemotingCommand):
                raise RemotingTimeoutError(f"the broker did not answer within {timeout:g} s")
        if answer.code != ResponseCode.SUCCESS:
            raise ResponseError(answer.code, answer.remark)
        return answer

    async def _send_one(self, message: OutgoingMessage, meta: RequestMetadata, peer: str) -> Any:
        try:
            route = await self.route(message.topic)
            queues = routes.write_queues(route)
            if not queues:
                raise ProxyError(Code.FORBIDDEN, f"no broker takes writes to {message.topic!r}")
            if message.message_group:
                target = routes.queue_for_group(queues, message.message_group)
            else:
                self._round_robin += 1
                target = queues[self._round_robin % len(queues)]
            address = await self.master_address(message.topic, target.broker_name)
            header = SendMessageRequestHeader(
                producer_group=message.topic,
                topic=message.topic,
                default_topic=DEFAULT_TOPIC,
                default_topic_queue_nums=4,
                queue_id=target.queue_id,
                sys_flag=message.sys_flag,
                born_timestamp=message.born_timestamp or int(time.time() * 1000),
                flag=0,
                properties=encode_properties(message.properties),
                reconsume_times=0,
                unit_mode=False,
                broker_name=target.broker_name,
            )
            command = RemotingCommand(
                RequestCode.SEND_MESSAGE_V2,
                ext_fields=header.to_ext_fields(SEND_V2_NAMES),
                body=message.body,
            )
            response = await self.call_broker(address, command, peer)
        except Exception as exc:
            return spb.SendResultEntry(status=status_of(exc), message_id=message.message_id)
        answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        transaction_id = answer.transaction_id or message.message_id
        if message.transactional:
            self.transactions.add(
                TransactionRecord(
                    topic=message.topic,
                    transaction_id=transaction_id,
                    message_id=message.message_id,
                    broker_address=address,
                    commit_log_offset=decode_offset_msg_id(answer.msg_id)[1],
                    queue_offset=answer.queue_offset,
                )
            )
        return spb.SendResultEntry(
            status=OK,
            message_id=message.message_id,
            transaction_id=transaction_id,
            offset=answer.queue_offset,
            recall_handle=answer.recall_handle or "",
        )

    async def EndTransaction(self, request: spb.EndTransactionRequest, context: Any) -> Any:
        try:
            self.metadata(context, publish(request.topic.name))
            if not request.transaction_id:
                raise ProxyError(Code.INVALID_TRANSACTION_ID, "the request has no transaction id")
            record = self.transactions.pop(request.topic.name, request.transaction_id)
            if record is None:
                raise ProxyError(
                    Code.INTERNAL_SERVER_ERROR,
                    f"transaction {request.transaction_id} of topic {request.topic.name!r}"
                    " is unknown to this proxy (sent through another, or decided already)",
                )
            resolution = request.resolution
            if resolution not in (pb.COMMIT, pb.ROLLBACK):
                self.transactions.add(record)
                raise ProxyError(Code.BAD_REQUEST, "the resolution is neither COMMIT nor ROLLBACK")
            header = EndTransactionRequestHeader(
                producer_group=record.topic,
                tran_state_table_offset=record.queue_offset,
                commit_log_offset=record.commit_log_offset,
                commit_or_rollback=(
                    TRANSACTION_COMMIT if resolution == pb.COMMIT else TRANSACTION_ROLLBACK
                ),
                msg_id=record.message_id,
                from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK,
                transaction_id=record.transaction_id,
                topic=record.topic,
            )
            await self.instance.invoke_oneway(
                record.broker_address, RequestCode.END_TRANSACTION, header
            )
        except Exception as exc:
            return spb.EndTransactionResponse(status=status_of(exc))
        return spb.EndTransactionResponse(status=OK)

    def _register_publisher(self, client: Client) -> None:
        """Brokers ask the producer group (= topic) about open transactions: the proxy
        joins each published topic's group so that the question reaches it."""
        for topic in client.topics:
            if topic not in self.instance.producers:
                self.instance.producers[topic] = TransactionRelay(self, topic)
                self.instance.heartbeat_soon()

    def _forget_publisher(self, client: Client) -> None:
        for topic in client.topics:
            if not self.clients.publishers_of(topic):
                self.instance.producers.pop(topic, None)

    async def RecallMessage(self, request: spb.RecallMessageRequest, context: Any) -> Any:
        try:
            self.metadata(context, publish(request.topic.name))
            topic = request.topic.name
            try:
                handle = RecallHandle.decode(request.recall_handle)
            except ValueError as exc:
                raise ProxyError(Code.BAD_REQUEST, f"recall handle: {exc}") from None
            address = await self.master_address(topic, handle.broker_name)
            header = RecallMessageRequestHeader(
                topic=topic,
                recall_handle=request.recall_handle,
                producer_group=topic,
                broker_name=handle.broker_name,
            )
            response = await self.instance.invoke(address, RequestCode.RECALL_MESSAGE, header)
        except Exception as exc:
            return spb.RecallMessageResponse(status=status_of(exc))
        answer = RecallMessageResponseHeader.from_ext_fields(response.ext_fields)
        return spb.RecallMessageResponse(status=OK, message_id=answer.msg_id)

    # --- consuming (POP on the brokers) ---------------------------------------------

    async def ReceiveMessage(
        self, request: spb.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[Any]:
        async for response in self.consuming.receive(request, context):
            yield response

    async def AckMessage(self, request: spb.AckMessageRequest, context: Any) -> Any:
        return await self.consuming.ack(request, context)

    async def ChangeInvisibleDuration(
        self, request: spb.ChangeInvisibleDurationRequest, context: Any
    ) -> Any:
        return await self.consuming.change_invisible_duration(request, context)

    async def ForwardMessageToDeadLetterQueue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> Any:
        return await self.consuming.forward_to_dead_letter_queue(request, context)


class TransactionRelay:
    """The proxy as a member of producer group ``topic``: a broker's transaction check
    goes to a client publishing that topic, as RecoverOrphanedTransactionCommand."""

    def __init__(self, service: MessagingService, topic: str) -> None:
        self.service = service
        self.topic = topic

    def check_transaction(
        self, broker_address: str, header: CheckTransactionStateRequestHeader, message: Any
    ) -> None:
        publishers = self.service.clients.publishers_of(self.topic)
        if not publishers:
            log.info("no client publishes %s: transaction check left for later", self.topic)
            return
        transaction_id = header.transaction_id or message.msg_id
        self.service.transactions.add(
            TransactionRecord(
                topic=self.topic,
                transaction_id=transaction_id,
                message_id=message.msg_id,
                broker_address=broker_address,
                commit_log_offset=header.commit_log_offset,
                queue_offset=header.tran_state_table_offset,
            )
        )
        command = spb.TelemetryCommand(
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=incoming(message, self.topic), transaction_id=transaction_id
            )
        )
        publishers[hash(transaction_id) % len(publishers)].outboxes[-1].put_nowait(command)


def peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5555`` -> ``127.0.0.1:5555``, ``ipv6:%5B::1%5D:5555`` ->
    ``[::1]:5555`` (gRPC's peer string; grpcio percent-encodes IPv6 brackets)."""
    scheme, _, rest = peer.partition(":")
    return unquote(rest) if scheme in ("ipv4", "ipv6") else peer
