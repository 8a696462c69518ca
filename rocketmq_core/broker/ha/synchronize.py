"""SlaveSynchronize (HA.md §5): a slave copies its master's topic table, consumer offsets,
delay offsets and subscription groups, ``slaveSyncDelay`` after start and then every
``slaveSyncInterval`` (Java: 3 s and 10 s). With the timer plugin it also copies the timer
progress (GET_TIMER_CHECK_POINT, as RocketMQ 5 slaves do), so a slave made master later
delivers the timers its master had not finished, and only those.

Each request fails on its own and is logged at most once a minute per kind. The topic
table is asked of the master's VIP port (listenPort - 2), as Java's slaves ask; a master
that does not serve one is asked on its main port (said once per master address).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from ...errors import BodyError, RemotingError
from ...protocol.bodies import ConsumerOffsetWrapper, SubscriptionGroupWrapper, TopicConfigWrapper
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.json_body import load_object
from ...rate_limited_log import RateLimitedLog
from ...remoting.client import RemotingClient
from ...remoting.transport import format_address, parse_endpoint

if TYPE_CHECKING:
    from ..app import Broker

log = logging.getLogger("rocketmq.broker.ha")

REQUEST_TIMEOUT = 3.0  # seconds, each request
FAILURE_LOG_INTERVAL = 60.0  # seconds between two lines about one kind of failure
VIP_PORT_OFFSET = 2  # the VIP port is listenPort - 2


def vip_address(address: str) -> str:
    """``host:10911`` -> ``host:10909``: where Java's slaves ask for the topic table."""
    endpoint = parse_endpoint(address)
    vip = format_address(endpoint.host, endpoint.port - VIP_PORT_OFFSET)
    return f"{endpoint.scheme}://{vip}" if endpoint.scheme else vip


class SlaveSynchronize:
    """The ``slave_sync`` broker service: built on a SLAVE only."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.rounds = 0  # sync rounds run against a known master
        self._client: RemotingClient | None = None
        self._failures = {
            what: RateLimitedLog(log, FAILURE_LOG_INTERVAL)
            for what in ("topics", "offsets", "delay offsets", "groups", "timer progress")
        }
        # the master whose VIP port failed: later rounds ask its main port at once (a port
        # that takes the request and never answers would cost each round its timeout)
        self._no_vip: str | None = None

    @classmethod
    def for_broker(cls, broker: Broker) -> SlaveSynchronize | None:
        return cls(broker) if broker.config.is_slave else None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        config = self.broker.config
        dial = config.client_transports(self.broker.host.registry.transports.get)
        credentials = config.inner_client_credentials()
        async with RemotingClient(
            dial(config.transport),
            transports=dial,
            credentials=credentials,
            tls=config.client_tls(),  # tls.enable
        ) as client:
            self._client = client
            task_status.started()
            await anyio.sleep(config.slave_sync_delay / 1000)
            while True:
                await self.sync_once()
                await anyio.sleep(config.slave_sync_interval / 1000)

    def master_address(self) -> str | None:
        """The master's remoting address, None while unknown or when it is ourselves."""
        ha = self.broker.ha
        address = ha.master_address if ha is not None else None
        if not address or address == self.broker.config.broker_addr:
            return None
        return address

    async def sync_once(self) -> None:
        """One round: the four tables and the timer progress, each on its own."""
        master = self.master_address()
        if master is None or self._client is None:
            return
        self.rounds += 1
        await self._step("topics", self._sync_topics, master)
        await self._step("offsets", self._sync_offsets, master)
        await self._step("delay offsets", self._sync_delay_offsets, master)
        await self._step("groups", self._sync_groups, master)
        await self._step("timer progress", self._sync_timer_progress, master)

    async def _step(self, what: str, sync: Callable[[str], Awaitable[None]], master: str) -> None:
        try:
            await sync(master)
        except (RemotingError, OSError, BodyError) as exc:
            self._failures[what].warning("cannot sync %s from master %s: %s", what, master, exc)

    async def _ask(self, address: str, code: RequestCode, what: str) -> bytes:
        """The body of a successful answer to ``code``; RemotingError otherwise."""
        assert self._client is not None
        request = RemotingCommand.request(code, {})
        reply = await self._client.invoke(address, request, timeout=REQUEST_TIMEOUT)
        if reply.code != ResponseCode.SUCCESS:
            raise RemotingError(f"{what}: {code.name} answered {reply.code} {reply.remark or ''}")
        return reply.body or b""

    async def _sync_topics(self, master: str) -> None:
        if self._no_vip == master:
            body = await self._ask(master, RequestCode.GET_ALL_TOPIC_CONFIG, "topics")
        else:
            try:
                body = await self._ask(
                    vip_address(master), RequestCode.GET_ALL_TOPIC_CONFIG, "topics"
                )
            except RemotingError as exc:  # refused, or another program holds that port
                self._no_vip = master
                log.warning("master %s: no VIP port (%s); asking its main port", master, exc)
                body = await self._ask(master, RequestCode.GET_ALL_TOPIC_CONFIG, "topics")
        wrapper = TopicConfigWrapper.from_json(load_object(body, "topic config"))
        topics = self.broker.topics
        if wrapper.data_version != topics.data_version:
            topics.replace(wrapper)
            await topics.persist()
            log.info("topic table synced from master %s: %s", master, wrapper.data_version)

    async def _sync_offsets(self, master: str) -> None:
        body = await self._ask(master, RequestCode.GET_ALL_CONSUMER_OFFSET, "offsets")
        wrapper = ConsumerOffsetWrapper.decode(body)
        self.broker.offsets.merge(wrapper.offset_table)
        await self.broker.offsets.persist()

    async def _sync_delay_offsets(self, master: str) -> None:
        body = await self._ask(master, RequestCode.GET_ALL_DELAY_OFFSET, "delay offsets")
        delay = self.broker.services.get("delay_levels")
        if delay is not None:  # without the delay plugin nothing here reads them
            await delay.adopt_master_offsets(body)

    async def _sync_timer_progress(self, master: str) -> None:
        timers = self.broker.services.get("timer_wheel")
        if timers is None:  # without the timer plugin nothing here reads it
            return
        body = await self._ask(master, RequestCode.GET_TIMER_CHECK_POINT, "timer progress")
        await timers.adopt_master_checkpoint(body)

    async def _sync_groups(self, master: str) -> None:
        body = await self._ask(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "groups")
        wrapper = SubscriptionGroupWrapper.decode(body)
        groups = self.broker.groups
        if wrapper.data_version != groups.data_version:
            groups.replace(wrapper)
            await groups.persist()
            log.info("subscription groups synced from master %s", master)
