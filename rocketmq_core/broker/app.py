"""Broker: the store, topics, offsets and clients served over a transport.

One task group owns everything: the remoting server, name-server registration,
housekeeping (offset and topic persistence, client expiry), and the plugins' broker
services (delay delivery, transaction check-back). ``stop`` stops accepting, unregisters
from the name servers, answers held pulls, stops the services, persists and closes the
store. Every message a client sends passes the plugins' put hooks (``prepare``) first.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import zlib
from collections.abc import Awaitable, Callable, Collection
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus

from .. import runtime
from ..data_paths import check_writable_directory, check_writable_file, data_path_error
from ..errors import ConfigError, RemotingError, RequestRefused
from ..limits import raise_open_files_limit
from ..metrics.exporter import MetricsExporter
from ..plugins import PluginHost, load_plugins
from ..protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfigWrapper
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import PERM_RW
from ..protocol.headers import (
    BrokerIdentityRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
)
from ..registry import NamedRegistry
from ..remoting.client import RemotingClient
from ..remoting.connection import Connection
from ..remoting.processor import ProcessorTable
from ..remoting.server import RemotingServer
from ..remoting.transport import format_address, parse_endpoint
from ..store.api import MessageStore, MessageToStore, PutResult, replication_refusal
from ..store.loader import create_store
from .clients import ConsumerManager, ProducerManager
from .config import BrokerConfig
from .groups import SubscriptionGroupManager
from .ha.put import put_replicated
from .ha.service import HAService
from .locks import QueueLockTable
from .longpoll import PullHoldService
from .offsets import ConsumerOffsetManager
from .processors.send_frames import SendFrames
from .pull_rates import PullRates
from .put_hooks import PutHooks
from .stats import BrokerStats, sample_periodically
from .topics import TopicConfigManager

if TYPE_CHECKING:
    from ..acl.service import AclService

log = logging.getLogger("rocketmq.broker")
T = TypeVar("T")  # what a plugin factory builds for a broker

# live keys the store keeps a copy of: broker.conf key -> StoreConfig attribute
_STORE_LIVE_KEYS = {
    "maxMessageSize": "max_message_size",
    "diskMaxUsedSpaceRatio": "disk_max_used_space_ratio",
    "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio",
    "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio",
}
_DISK_RATIO_KEYS = frozenset(_STORE_LIVE_KEYS) - {"maxMessageSize"}
HOUSEKEEPING_INTERVAL = 1.0
SERVICE_STOP_GRACE = 5.0  # seconds a broker service has to finish once cancelled
CLIENT_SCAN_INTERVAL = 10.0


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        host: PluginHost | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.host = host or load_plugins()
        root = Path(config.store_path_root_dir)
        self.topics = TopicConfigManager(config, str(root / "config" / "topics.json"))
        self.offsets = ConsumerOffsetManager(str(root / "config" / "consumerOffset.json"))
        self.groups = SubscriptionGroupManager(
            str(root / "config" / "subscriptionGroup.json"),
            config.auto_create_subscription_group,
            mirrors_master=config.is_slave,
        )
        self.consumers = ConsumerManager()
        self.producers = ProducerManager()
        self.pulls = PullHoldService()
        self.pull_rates = PullRates(clock)  # the consumeTps of GET_CONSUME_STATS
        self.stats = BrokerStats(config.broker_cluster_name)  # VIEW_BROKER_STATS_DATA, runtime
        self.queue_locks = QueueLockTable()
        self._store: MessageStore | None = None  # made and opened by run
        # the plugins' put hooks, built from their factories when the broker starts
        self.put_hooks = PutHooks()
        # the running broker services by name (Any: a plugin uses its own service's methods)
        self.services: dict[str, Any] = {}
        self.ha: HAService | None = None  # replication, when the store does it
        self.acl: AclService | None = None  # the ACL rules and their guard (aclEnable)
        self._services_group: TaskGroup | None = None
        self._services_done: anyio.Event | None = None
        self.server: RemotingServer | None = None
        self.vip_server: RemotingServer | None = None  # listenPort - 2 (fastListenPort)
        self.address: str | None = None
        self.endpoints: list[str] = []  # quic://brokerIP1:port of each extra listener
        self.metrics_address: str | None = None  # the PROM endpoint (metricsExporterType)
        self.ready = False
        self.boot_timestamp = int(time.time() * 1000)
        self.config_version = DataVersion(timestamp=self.boot_timestamp)  # GET_BROKER_CONFIG
        self._clock = clock
        self._task_group: TaskGroup | None = None
        self._register_now: anyio.Event | None = None  # made inside the event loop
        self._namesrv_client: RemotingClient | None = None
        self._stop_requested: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._grace = 5.0
        self._failure: Exception | None = None  # a broker task's, raised by run once stopped
        self._started = False
        self._routine: anyio.CancelScope | None = None  # registration and housekeeping

    def now(self) -> float:
        """Milliseconds on the liveness clock."""
        return self._clock() * 1000.0

    @classmethod
    def serving(cls, config: BrokerConfig, **options: Any) -> AbstractAsyncContextManager[Broker]:
        """A started broker, stopped gracefully when the block exits."""
        return runtime.serving(cls(config, **options))

    @property
    def store(self) -> MessageStore:
        """The message store: open from start-up on, closed once the broker has stopped."""
        if self._store is None:
            raise RuntimeError("the broker has no store before it starts: use it once running")
        return self._store

    # --- lifecycle -------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        self.host.require_healthy()
        self.config.validate()
        metrics = self._metrics_exporter()  # a missing package fails before any port binds
        raise_open_files_limit()
        await anyio.to_thread.run_sync(self._check_data_paths)
        transports = self.host.registry.transports.get
        transport = transports(self.config.transport)
        tls = self.config.tls_for(transport.name)  # TCP: as tls.server.mode says
        hooks = await self._open_acl()
        # held: the port is bound first (the store needs its number) but no request is
        # read before the broker is ready, so none is refused as "starting"
        self.server = RemotingServer(
            transport,
            self.processor_table(),
            hooks=hooks,
            tls=tls,
            held=True,
            limits=self.config.server_limits(),
        )
        self.server.on_connection_closed(self._connection_closed)
        # the VIP port (Java's fastRemotingServer): the same requests, on listenPort - 2
        self.vip_server = vip_server = RemotingServer(
            transport,
            self.server.processors,
            hooks=hooks,
            tls=tls,
            held=True,
            limits=self.config.server_limits(),
        )
        vip_server.on_connection_closed(self._connection_closed)
        self._register_now = anyio.Event()
        self._stop_requested = anyio.Event()
        self._stopped = anyio.Event()
        self._failure = None
        self._started = False
        self._routine = anyio.CancelScope()
        # a run that ends by an error still lets stop() return (it waits, shielded, for
        # _stopped; the error then reaches whoever started the broker)
        try:
            # each part pushes what stops it: a stop, or a part that fails to start, leaves
            # those started in reverse order; the store and the name-server client enter
            # task groups in this task and scope, so they are left here too, with no
            # scope in between
            async with AsyncExitStack() as parts:
                task_group = await parts.enter_async_context(anyio.create_task_group())
                parts.callback(task_group.cancel_scope.cancel)
                self._task_group = task_group
                if self.acl is not None:
                    task_group.start_soon(self.acl.watch)
                if not self.config.ha_listen_port and self.config.listen_port:
                    self.config.ha_listen_port = self.config.listen_port + 1
                fast_port = self.config.vip_port()  # before listenPort 0 becomes a real port
                # bind first: with port 0 the store must know the real port (its store host)
                serve = partial(self.server.serve, extra=self.config.listeners(transports))
                bound = await task_group.start(
                    self._stopping_on_failure(serve), "0.0.0.0", self.config.listen_port
                )
                self.config.listen_port = int(bound.rsplit(":", 1)[1])
                self.config.fast_listen_port = await self._serve_vip(
                    task_group, vip_server, fast_port
                )
                if metrics is not None:  # its port with the others: a port in use fails here
                    await self._serve_metrics(task_group, metrics)
                    parts.callback(metrics.stop)
                self.address = self.config.broker_addr
                self.endpoints = [
                    advertised(address, self.config.broker_ip1)
                    for address in self.server.extra_addresses
                ]
                if transport.name != "tcp":  # brokerAddr itself is not tcp: say what it is
                    self.endpoints.insert(0, f"{transport.name}://{self.address}")
                await self._open_store()
                parts.push_async_callback(self._save_and_close_store)
                self.put_hooks = PutHooks(self._built(self.host.registry.put_hooks).values())
                self.services = self._built(self.host.registry.broker_services)
                self.ha = self.services.get("ha")
                await task_group.start(self._stopping_on_failure(self._run_services))
                parts.push_async_callback(self._stop_services)
                parts.push_async_callback(self._stop_serving)
                await self.topics.persist()
                self.topics.on_change(self.request_registration)
                dial = self.config.client_transports(transports)
                parts.callback(self._forget_namesrv_client)
                self._namesrv_client = await parts.enter_async_context(
                    RemotingClient(
                        dial(self.config.transport),
                        transports=dial,
                        credentials=self.config.inner_client_credentials(),
                        tls=self.config.client_tls(),  # tls.enable
                    )
                )
                parts.push_async_callback(self._leave_name_servers)
                self.ready = True
                parts.callback(self._refuse_requests)
                self.server.open_for_requests()
                vip_server.open_for_requests()
                await self._register_all()
                task_group.start_soon(self._stopping_on_failure(self._routine_work))
                self.host.hook.rocketmq_broker_started(broker=self, address=self.address)
                parts.callback(self.host.hook.rocketmq_broker_stopping, broker=self)
                self._started = True
                task_status.started(self.address)
                await self._stop_requested.wait()
        finally:
            self._task_group = None
            self._stopped.set()
        if self._failure is not None:
            raise self._failure

    async def _open_acl(self) -> tuple[Any, ...]:
        """With aclEnable, the rules (a ConfigError if they cannot be used) and the RPC
        hook that checks every request on both ports against them."""
        if not self.config.acl_enable:
            self.acl = None
            return ()
        # the ACL service (and the YAML behind its rules) loads only when aclEnable asks
        from ..acl.rules import acl_home
        from ..acl.service import AclService

        self.acl = AclService.for_broker(
            acl_home(self.config.rocketmq_home), self.config.acl_file_watch_interval / 1000
        )
        await self.acl.open()
        return (self.acl.guard,)

    async def _serve_vip(self, task_group: TaskGroup, server: RemotingServer, port: int) -> int:
        """Listen on the VIP port; its bound port number."""
        try:
            bound = await task_group.start(self._stopping_on_failure(server.serve), "0.0.0.0", port)
        except (ConfigError, ExceptionGroup) as exc:  # a port in use: say which setting
            refusal = _sole_config_error(exc)
            if refusal is None:
                raise
            raise ConfigError(f"the VIP port (fastListenPort, listenPort - 2): {refusal}") from None
        return int(bound.rsplit(":", 1)[1])

    def _metrics_exporter(self) -> MetricsExporter | None:
        """The RIP-46 exporter metricsExporterType asks for, None for DISABLE."""
        config = self.config
        plan = config.metrics_plan(config.broker_ip1)
        if not plan.enabled:
            return None
        from ..metrics.broker_meter import BrokerMeter

        labels = plan.base_labels("broker", config.broker_name, config.broker_cluster_name)
        return MetricsExporter(plan, BrokerMeter(self), labels)

    async def _serve_metrics(self, task_group: TaskGroup, metrics: MetricsExporter) -> None:
        """Start the exporter, and the counts only it reads, before requests are served."""
        try:
            self.metrics_address = await task_group.start(self._stopping_on_failure(metrics.run))
        except (ConfigError, ExceptionGroup) as exc:  # its port in use: one line
            refusal = _sole_config_error(exc)
            if refusal is None:
                raise
            raise refusal from None
        metrics.source.attach()

    async def _open_store(self) -> None:
        """Load the config files and open the store (the store needs the bound port)."""
        try:
            self.topics.load()
            self.offsets.load()
            self.groups.load()
            store = self._store = create_store(
                self.config.store, self.config.store_config(), self.host
            )
            refusal = replication_refusal(store) if self.config.replicates else None
            if refusal is not None:
                raise ConfigError(f"brokerRole={self.config.broker_role}: {refusal}")
            store.add_dispatcher(self.pulls)  # wakes held pulls
            self.stats.store_host_v6 = ":" in self.config.broker_ip1  # an IPv6 store host
            await store.open()
        except OSError as exc:  # a file the checks could not foresee (permissions)
            raise data_path_error(exc, "storePathRootDir", self.config.store_path_root_dir) from exc

    def _check_data_paths(self) -> None:
        """ConfigErrors naming the setting, before a path fails deep in the store."""
        check_writable_directory(self.config.store_path_root_dir, "storePathRootDir")
        if self.config.store_path_commit_log:
            check_writable_directory(self.config.store_path_commit_log, "storePathCommitLog")
        if self.config.broker_config_path:
            check_writable_file(self.config.broker_config_path, "brokerConfigPath")

    def _stopping_on_failure(self, function: Callable[..., Awaitable[Any]]) -> Any:
        """``function`` as a broker task whose failure stops the broker gracefully (the
        store and the name-server client are left in order) and is then raised by run;
        a failure left to the task group would cancel run past its shutdown."""

        async def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                await function(*args, **kwargs)
            except Exception as exc:
                if not self._started:  # a port in use...: run raises it as it is
                    raise
                log.error("stopping the broker: a broker task failed", exc_info=exc)
                if self._failure is None:
                    self._failure = exc
                assert self._stop_requested is not None  # made by run before any task
                self._stop_requested.set()

        return guarded

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, unregister, answer held pulls, persist, close the store."""
        if self._task_group is None or self._stop_requested is None or self._stopped is None:
            return
        self._grace = grace
        self._stop_requested.set()
        await self._stopped.wait()

    async def _routine_work(self) -> None:
        """Registration every 30 s and housekeeping, until the shutdown begins."""
        assert self._routine is not None
        with self._routine:
            async with anyio.create_task_group() as routine:
                routine.start_soon(self._register_periodically)
                routine.start_soon(self._housekeeping)
                routine.start_soon(sample_periodically, self.stats)

    # the steps of a stop, pushed by run as their parts start; they run in reverse

    def _refuse_requests(self) -> None:
        self.ready = False  # requests are answered "starting or stopping" from here on

    async def _leave_name_servers(self) -> None:
        # no registration may follow the unregistration, nor use the closing client
        assert self._routine is not None
        self._routine.cancel()
        await self._unregister_all()

    def _forget_namesrv_client(self) -> None:
        self._namesrv_client = None

    async def _stop_serving(self) -> None:
        self.pulls.release_all()
        if self.server is not None:
            await self.server.stop(self._grace)
        if self.vip_server is not None:
            await self.vip_server.stop(self._grace)

    async def _save_and_close_store(self) -> None:
        try:
            with anyio.CancelScope(shield=True):  # a start cut short saves what it loaded
                await self.offsets.persist()
                await self.topics.persist()
                await self.groups.persist()
        finally:
            try:
                await self.store.close()
            except OSError as exc:  # its last writes failed: say where, not a traceback
                root = self.config.store_path_root_dir
                raise data_path_error(exc, "storePathRootDir", root) from exc

    # --- plugins: put hooks and services -----------------------------------------------------

    def _built(self, registry: NamedRegistry[Callable[[Broker], T | None]]) -> dict[str, T]:
        """Each factory of ``registry`` called with this broker; None means "not here"."""
        built: dict[str, T] = {}
        for entry in registry.entries():
            made = entry.obj(self)
            if made is not None:
                built[entry.name] = made
        return built

    def prepare(self, message: MessageToStore) -> MessageToStore:
        """``message`` as the put hooks leave it (a delayed message moved to
        SCHEDULE_TOPIC_XXXX, a half message to the half topic); a hook rejects a
        message by raising RequestRefused."""
        return self.put_hooks.prepare(message)

    async def put(self, message: MessageToStore) -> PutResult:
        """Store a message the broker makes itself (a send-back, a commit, a delay
        delivery) as a send is stored: flushed as the policy says and, on a SYNC_MASTER,
        waited for on a slave (HA.md §3). The put hooks are not run: ``prepare`` first."""
        result = await put_replicated(self, message)
        self.stats.count_stored(message, result)
        return result

    async def _run_services(self, *, task_status: TaskStatus[None]) -> None:
        self._services_done = anyio.Event()
        try:
            async with anyio.create_task_group() as group:
                self._services_group = group
                for name, service in self.services.items():
                    await group.start(service.run, name=f"broker service {name}")
                task_status.started()
        finally:
            self._services_done.set()

    async def _stop_services(self) -> None:
        """Cancel the services and wait (a bounded while) for them to save their state."""
        if self._services_group is None or self._services_done is None:
            return
        self._services_group.cancel_scope.cancel()
        with anyio.move_on_after(SERVICE_STOP_GRACE, shield=True):
            await self._services_done.wait()
        self._services_group = None

    def processor_table(self) -> ProcessorTable:
        """Every broker processor the plugins registered, bound to this server, with
        runs of usual sends answered before decoding where the send processors are ours."""
        table = self.host.processor_table("broker", self)
        table.frame_server = SendFrames.for_table(self, table)
        return table

    def check_ready(self) -> None:
        if not self.ready:
            raise RequestRefused(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "the broker is starting or stopping; retry in a moment",
            )

    async def config_updated(self, keys: Collection[str]) -> None:
        """UPDATE_BROKER_CONFIG changed ``keys`` of the config: a new config version, the
        values the broker holds copies of, a registration if the permission changed, and
        the config file (``brokerConfigPath``) rewritten when there is one."""
        self.config_version = self.config_version.next(int(time.time() * 1000))
        self.groups.auto_create = self.config.auto_create_subscription_group
        if self._store is not None:
            await self._apply_to_store(keys)
        if "brokerPermission" in keys:
            self.topics.touch()  # registers the topics again, with the new permission
        if self.config.broker_config_path:
            await self.config.save(self.config.broker_config_path)

    async def _apply_to_store(self, keys: Collection[str]) -> None:
        """The store's copies of the live keys follow (its size check, its disk checks);
        a changed disk ratio is checked against the disk at once."""
        fresh = self.config.store_config()
        for key, name in _STORE_LIVE_KEYS.items():
            if key in keys:
                setattr(self.store.config, name, getattr(fresh, name))
        changed = getattr(self.store, "live_config_changed", None)  # a store with cached copies
        if changed is not None:
            changed()
        disk = getattr(self.store, "disk", None)  # the DiskGuard of a persistent store
        if disk is not None and _DISK_RATIO_KEYS.intersection(keys):
            await anyio.to_thread.run_sync(disk.check, time.time(), False)

    # --- clients ---------------------------------------------------------------------------

    def _connection_closed(self, connection: Connection) -> None:
        for group in self.consumers.channel_closed(connection):
            self.notify_consumers_changed(group)
        self.producers.channel_closed(connection)

    def notify_consumers_changed(self, group_name: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every member of a clustering group."""
        group = self.consumers.group(group_name)
        if group is None or not group.notifies or self._task_group is None:
            return
        settings = self.groups.table.get(group_name)
        if settings is not None and not settings.notify_consumer_ids_changed_enable:
            return
        fields = NotifyConsumerIdsChangedRequestHeader(consumer_group=group_name).to_ext_fields()
        for channel in list(group.channels):
            self.send_to_client(
                channel,
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, fields, oneway=True
                ),
            )

    def send_to_client(self, channel: object, request: RemotingCommand) -> None:
        """Send a oneway ``request`` to a client over its connection, in the background."""
        if isinstance(channel, Connection) and not channel.closed and self._task_group:
            self._task_group.start_soon(_send_quietly, channel, request)

    # --- name servers ----------------------------------------------------------------------

    def _register_request(self) -> RemotingCommand:
        config = self.config
        body = RegisterBrokerBody(self._registered_topics()).encode(config.compressed_register)
        header = RegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name,
            ha_server_addr=config.ha_server_addr,
            broker_id=config.broker_id,
            compressed=config.compressed_register,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
            endpoints=";".join(self.endpoints) or None,
        )
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)

    def _registered_topics(self) -> TopicConfigWrapper:
        """The topics as registered: a broker that may not be read or written (its
        brokerPermission) registers each topic with that permission taken away."""
        wrapper = self.topics.wrapper()
        permission = self.config.broker_permission
        if permission & PERM_RW != PERM_RW:
            wrapper.topic_configs = {
                name: dataclasses.replace(topic, perm=topic.perm & permission)
                for name, topic in wrapper.topic_configs.items()
            }
        return wrapper

    async def _register_all(self) -> None:
        addresses = self.config.namesrv_addresses()
        if not addresses or self._namesrv_client is None:
            return
        timeout = self.config.register_broker_timeout_mills / 1000
        for address in addresses:
            try:
                reply = await self._namesrv_client.invoke(
                    address, self._register_request(), timeout=timeout
                )
                if reply.code != ResponseCode.SUCCESS:
                    log.warning("name server %s refused registration: %s", address, reply.remark)
                elif self.ha is not None and self.config.is_slave:
                    answer = RegisterBrokerResponseHeader.from_ext_fields(reply.ext_fields or {})
                    self.ha.registered(answer.master_addr, answer.ha_server_addr)
            except (RemotingError, OSError) as exc:
                log.warning("cannot register with name server %s: %s", address, exc)

    def request_registration(self) -> None:
        """Register with the name servers soon (the topic table changed)."""
        if self._register_now is not None:
            self._register_now.set()

    async def _register_periodically(self) -> None:
        period = min(max(self.config.register_name_server_period, 10_000), 60_000) / 1000
        while True:
            with anyio.move_on_after(period):
                assert self._register_now is not None
                await self._register_now.wait()
                await anyio.sleep(0.05)  # let a burst of topic creations share one registration
            self._register_now = anyio.Event()
            await self._register_all()

    async def _unregister_all(self) -> None:
        if self._namesrv_client is None:
            return
        config = self.config
        fields = BrokerIdentityRequestHeader(
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name,
            broker_id=config.broker_id,
        ).to_ext_fields()
        for address in config.namesrv_addresses():
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, fields)
            try:
                await self._namesrv_client.invoke(address, request, timeout=3)
            except (RemotingError, OSError) as exc:
                log.warning("cannot unregister from name server %s: %s", address, exc)

    # --- housekeeping ----------------------------------------------------------------------

    async def _housekeeping(self) -> None:
        last_offsets = last_scan = self._clock()
        while True:
            await anyio.sleep(HOUSEKEEPING_INTERVAL)
            now = self._clock()
            if now - last_offsets >= self.config.flush_consumer_offset_interval / 1000:
                last_offsets = now
                await self.offsets.persist()
            await self.topics.persist()
            await self.groups.persist()
            if now - last_scan >= CLIENT_SCAN_INTERVAL:
                last_scan = now
                timeout = self.config.channel_expired_timeout
                expired = self.consumers.expire(self.now(), timeout)
                for group in {group for group, _channel in expired}:
                    log.info("consumers of %s expired", group)
                    self.notify_consumers_changed(group)
                self.producers.expire(self.now(), timeout)

    def random_queue(self, write_queue_nums: int) -> int:
        return random.randrange(write_queue_nums) if write_queue_nums > 0 else 0


async def _send_quietly(connection: Connection, request: RemotingCommand) -> None:
    try:
        await connection.invoke_oneway(request)
    except (RemotingError, OSError) as exc:
        log.debug("notify to %s failed: %s", connection.peer_address, exc)


def _sole_config_error(error: BaseException) -> ConfigError | None:
    """The ConfigError that task groups wrapped, one inside the other, if that is all."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error if isinstance(error, ConfigError) else None


def advertised(bound: str, broker_ip: str) -> str:
    """``quic://0.0.0.0:10911`` as clients reach it: ``quic://<brokerIP1>:10911``."""
    endpoint = parse_endpoint(bound)
    return f"{endpoint.scheme}://{format_address(broker_ip, endpoint.port)}"
