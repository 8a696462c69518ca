"""ClientInstance: the connections, route cache and heartbeats that clients share.

Java's MQClientInstance: one per client id. Producers and consumers register their
group with it; it keeps their routes fresh (every ``poll_namesrv_interval``),
heartbeats every broker it knows (every ``heartbeat_interval``), and answers what
brokers ask of clients (a consumer group changed, reset your offsets, check a
transaction, report how you run, consume this one message).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from typing import Any, Protocol, runtime_checkable

import anyio
from anyio.abc import TaskGroup

from ..errors import RemotingError, ResponseError
from ..plugins import PluginHost, load_plugins
from ..protocol.bodies import (
    BrokerData,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ResetOffsetBody,
    TopicRouteData,
)
from ..protocol.codes import LanguageCode, RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import MASTER_ID
from ..protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CustomHeader,
    GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
    UnregisterClientRequestHeader,
)
from ..protocol.heartbeat import ConsumerData, HeartbeatData, MessageQueue
from ..protocol.message import decode_record
from ..remoting.client import RemotingClient
from ..remoting.processor import ProcessorTable, RequestContext
from ..remoting.transport import encrypting_transports
from .config import ClientConfig
from .lifetime import start_parts
from .message import ReceivedMessage

log = logging.getLogger("rocketmq.client")

Header = CustomHeader | Mapping[str, str] | None


class ConsumerMember(Protocol):
    """What a consumer gives its instance: heartbeat data and answers to brokers."""

    def consumer_data(self) -> ConsumerData: ...

    def request_rebalance(self) -> None: ...

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    def running_info(self) -> ConsumerRunningInfo: ...


@runtime_checkable
class DirectConsumer(Protocol):
    """A consumer with a listener (a push consumer): it can take one message an admin
    hands it through a broker (CONSUME_MESSAGE_DIRECTLY)."""

    async def consume_directly(self, message: ReceivedMessage) -> ConsumeMessageDirectlyResult: ...


class ProducerMember(Protocol):
    def check_transaction(
        self, broker_address: str, header: CheckTransactionStateRequestHeader, message: Any
    ) -> None: ...


_default_host: PluginHost | None = None


def default_host() -> PluginHost:
    """The installed plugins' transports, loaded once per process (all a client uses)."""
    global _default_host
    if _default_host is None:
        _default_host = load_plugins(kinds=("transports",))
    return _default_host


class ClientInstance:
    """An async context manager; producers and consumers share one when given one."""

    def __init__(self, config: ClientConfig, *, host: PluginHost | None = None) -> None:
        self.config = config
        self.namesrv_addresses = config.namesrv_addresses()
        self.client_id = config.client_id()
        self.credentials = config.signing_credentials()  # a ConfigError now, not at start
        self.host = host or default_host()
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        # (group, queue) -> the brokerId the last pull reply suggested (HA.md §6.2)
        self.pull_broker_ids: dict[tuple[str, MessageQueue], int] = {}
        self.broker_transport = config.broker_transport()
        # a broker's advertised address -> how this client reaches it (quic://...)
        self._reach: dict[str, str] = {}
        self._unreachable_warned: set[str] = set()
        self._watched_topics: set[str] = set()
        self._route_listeners: list[Callable[[str, TopicRouteData], None]] = []
        self._namesrv_index = 0
        self._remoting: RemotingClient | None = None
        self._task_group: TaskGroup | None = None
        self._heartbeat_now: anyio.Event | None = None
        self._users = 0  # the open ``async with`` blocks sharing this instance
        self._lifetime: AsyncExitStack | None = None  # what the last exit leaves, in order

    # --- life cycle ------------------------------------------------------------------

    async def __aenter__(self) -> ClientInstance:
        """Start on the first entry; later entries share what runs (until the last exit).

        Its task groups are left by the task that entered them, so a shared instance is
        entered first and left last by one task: nest the ``async with`` blocks."""
        if self._users == 0:
            self._lifetime = await start_parts(self._start)
        self._users += 1
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self._users -= 1
        if self._users > 0:
            return
        lifetime, self._lifetime = self._lifetime, None
        if lifetime is not None:
            await lifetime.aclose()

    async def _start(self, lifetime: AsyncExitStack) -> None:
        """The connections, then the routes and heartbeat tasks."""
        transports = encrypting_transports(
            self.host.registry.transports.get, self.config.quic_verification()
        )
        remoting = RemotingClient(
            transports(self.config.transport),
            processors=self._processors(),
            tls=self.config.tls,
            transports=transports,
            credentials=self.credentials,
        )
        lifetime.callback(self._forget_remoting)
        self._remoting = await lifetime.enter_async_context(remoting)
        lifetime.callback(self._forget_task_group)
        task_group = await lifetime.enter_async_context(anyio.create_task_group())
        lifetime.callback(task_group.cancel_scope.cancel)
        self._task_group = task_group
        self._heartbeat_now = anyio.Event()
        task_group.start_soon(self._refresh_routes_periodically)
        task_group.start_soon(self._heartbeat_periodically)

    def _forget_task_group(self) -> None:
        self._task_group = None
        self._heartbeat_now = None

    def _forget_remoting(self) -> None:
        self._remoting = None

    @property
    def task_group(self) -> TaskGroup:
        if self._task_group is None:
            raise RemotingError("the client is not started: use it in 'async with'")
        return self._task_group

    # --- requests --------------------------------------------------------------------

    def request(
        self, code: int, header: Header = None, body: bytes = b"", *, oneway: bool = False
    ) -> RemotingCommand:
        fields = header.to_ext_fields() if isinstance(header, CustomHeader) else header
        request = RemotingCommand.request(code, fields, body, oneway=oneway)
        request.language = LanguageCode.PYTHON
        return request

    async def invoke(
        self,
        address: str,
        code: int,
        header: Header = None,
        body: bytes = b"",
        *,
        timeout: float | None = None,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Send a request and return the response; ResponseError unless its code is in
        ``accept``."""
        return await self.invoke_command(
            address, self.request(code, header, body), timeout=timeout, accept=accept
        )

    async def invoke_command(
        self,
        address: str,
        request: RemotingCommand,
        *,
        timeout: float | None = None,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        response = await self.invoke_unchecked(address, request, timeout)
        if response.code not in accept:
            raise ResponseError(response.code, response.remark)
        return response

    def invoke_unchecked(
        self, address: str, request: RemotingCommand, timeout: float | None = None
    ) -> Awaitable[RemotingCommand]:
        """``invoke_command`` whose caller reads the response's code itself: the
        connection's own coroutine, one less per request (a send's hot path)."""
        if self._remoting is None:
            raise RemotingError("the client is not started: use it in 'async with'")
        return self._remoting.invoke(
            self._reach.get(address, address), request, timeout or self.config.request_timeout
        )

    async def invoke_oneway(
        self, address: str, code: int, header: Header = None, body: bytes = b""
    ) -> None:
        await self.invoke_command_oneway(address, self.request(code, header, body, oneway=True))

    async def invoke_command_oneway(self, address: str, request: RemotingCommand) -> None:
        if self._remoting is None:
            raise RemotingError("the client is not started: use it in 'async with'")
        await self._remoting.invoke_oneway(self._reach.get(address, address), request)

    async def invoke_namesrv(
        self,
        code: int,
        header: Header = None,
        body: bytes = b"",
        *,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Ask the name servers in turn until one answers (a ResponseError is an answer)."""
        errors: list[str] = []
        count = len(self.namesrv_addresses)
        for attempt in range(count):
            address = self.namesrv_addresses[(self._namesrv_index + attempt) % count]
            try:
                response = await self.invoke(address, code, header, body, accept=accept)
            except (RemotingError, OSError) as exc:
                errors.append(f"{address}: {exc}")
                continue
            self._namesrv_index = (self._namesrv_index + attempt) % count
            return response
        raise RemotingError("no name server answered: " + "; ".join(errors))

    # --- routes ----------------------------------------------------------------------

    def on_route_changed(
        self, listener: Callable[[str, TopicRouteData], None]
    ) -> Callable[[], None]:
        """Call ``listener(topic, route)`` on each new route; returns its removal."""
        self._route_listeners.append(listener)
        return lambda: self._route_listeners.remove(listener)

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        """The route of ``topic`` (cached, refreshed in the background once asked for);
        ResponseError TOPIC_NOT_EXIST when no broker serves it."""
        self._watched_topics.add(topic)
        route = self.routes.get(topic)
        if route is None or refresh:
            route = await self._fetch_route(topic)
        return route

    async def _fetch_route(self, topic: str) -> TopicRouteData:
        response = await self.invoke_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic)
        )
        route = TopicRouteData.decode(response.body)
        self.learn_endpoints(route.broker_datas)
        for broker in route.broker_datas:
            self.broker_addrs[broker.broker_name] = dict(broker.broker_addrs)
        previous = self.routes.get(topic)
        self.routes[topic] = route
        if previous is None or previous.to_json() != route.to_json():
            for listener in self._route_listeners:
                listener(topic, route)
            self.heartbeat_soon()  # a new broker should know us before we use it
        return route

    def learn_endpoints(self, brokers: Iterable[BrokerData]) -> None:
        """Reach each broker over this client's broker transport where it advertises
        an endpoint for it; over its plain address (tcp) otherwise, with a warning."""
        if self.broker_transport == "tcp":  # what every broker address is served over
            return
        prefix = f"{self.broker_transport}://"
        for broker in brokers:
            for broker_id, address in broker.broker_addrs.items():
                endpoint = next(
                    (e for e in broker.endpoints.get(broker_id, ()) if e.startswith(prefix)), None
                )
                if endpoint is not None:
                    self._reach[address] = endpoint
                    continue
                self._reach[address] = f"tcp://{address}"
                if address not in self._unreachable_warned:
                    self._unreachable_warned.add(address)
                    log.warning(
                        "broker %s (%s) advertises no %s endpoint: reaching it over tcp",
                        broker.broker_name,
                        address,
                        self.broker_transport,
                    )

    def forget_topic(self, topic: str) -> None:
        self._watched_topics.discard(topic)

    def master_address(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def broker_address(self, broker_name: str) -> str | None:
        """The master's address, else any live member's (reads may go to a slave)."""
        members = self.broker_addrs.get(broker_name)
        if not members:
            return None
        return members.get(MASTER_ID) or min(members.items())[1]

    def read_address(self, broker_name: str, broker_id: int) -> tuple[str, int] | None:
        """Where to read from a broker group, and that member's id: ``broker_id``, else
        the next id up when ``broker_id`` names a slave, else any member (the lowest id),
        so reads go on from a slave while the master is gone (HA.md §6.2)."""
        members = self.broker_addrs.get(broker_name)
        if not members:
            return None
        for candidate in (broker_id, broker_id + 1) if broker_id != MASTER_ID else (broker_id,):
            address = members.get(candidate)
            if address is not None:
                return address, candidate
        lowest = min(members)
        return members[lowest], lowest

    async def _refresh_routes_periodically(self) -> None:
        while True:
            await anyio.sleep(self.config.poll_namesrv_interval)
            await self.refresh_routes()

    async def refresh_routes(self) -> None:
        for topic in sorted(self._watched_topics):
            try:
                await self._fetch_route(topic)
            except ResponseError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    self.routes.pop(topic, None)
                log.debug("route of %s not refreshed: %s", topic, exc)
            except RemotingError as exc:
                log.warning("route of %s not refreshed: %s", topic, exc)

    # --- heartbeats ------------------------------------------------------------------

    def heartbeat_soon(self) -> None:
        if self._heartbeat_now is not None:
            self._heartbeat_now.set()

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            self.client_id,
            producer_groups=sorted(self.producers),
            consumers=[member.consumer_data() for member in self.consumers.values()],
        )

    async def heartbeat_all(self) -> None:
        """Tell every known broker who we are; a broker that cannot be reached is logged."""
        if not self.producers and not self.consumers:
            return
        body = self.heartbeat_data().encode()
        for broker_name, members in list(self.broker_addrs.items()):
            for broker_id, address in sorted(members.items()):
                if broker_id != MASTER_ID and not self.consumers:
                    continue  # producers only talk to masters
                try:
                    await self.invoke(address, RequestCode.HEART_BEAT, None, body)
                except (RemotingError, ResponseError) as exc:
                    log.warning("heartbeat to %s (%s) failed: %s", broker_name, address, exc)

    async def _heartbeat_periodically(self) -> None:
        while True:
            assert self._heartbeat_now is not None
            with anyio.move_on_after(self.config.heartbeat_interval):
                await self._heartbeat_now.wait()
            self._heartbeat_now = anyio.Event()
            await self.heartbeat_all()

    async def unregister(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        """Leave a group on every broker (Java does this at shutdown)."""
        header = UnregisterClientRequestHeader(
            client_id=self.client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        for members in list(self.broker_addrs.values()):
            for address in members.values():
                try:
                    await self.invoke(address, RequestCode.UNREGISTER_CLIENT, header)
                except (RemotingError, ResponseError) as exc:
                    log.debug("unregister from %s failed: %s", address, exc)

    # --- requests from brokers -------------------------------------------------------

    def _processors(self) -> ProcessorTable:
        table = ProcessorTable()
        table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        table.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly)
        table.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction)
        return table

    def _on_ids_changed(self, ctx: RequestContext, request: RemotingCommand) -> None:
        header = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(request.ext_fields)
        member = self.consumers.get(header.consumer_group)
        if member is not None:
            member.request_rebalance()

    def _on_reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> None:
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        member = self.consumers.get(header.group)
        if member is not None:
            member.reset_offsets(header.topic, ResetOffsetBody.decode(request.body).offset_table)

    def _on_running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        member = self.consumers.get(group)
        if member is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{group}> not exist in this consumer",
            )
        return request.response(body=member.running_info().encode())

    async def _on_consume_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        member = self.consumers.get(header.consumer_group)
        if not isinstance(member, DirectConsumer):  # none here, or no listener to run
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        message = ReceivedMessage.of(decode_record(request.body), header.broker_name or "")
        result = await member.consume_directly(message)
        return request.response(body=result.encode())

    def _on_check_transaction(self, ctx: RequestContext, request: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        message = decode_record(request.body)
        group = message.properties.get("PGROUP", "")
        member = self.producers.get(group)
        if member is None:
            log.warning("a transaction check for producer group %r, which is not here", group)
            return
        member.check_transaction(ctx.peer_address, header, message)
