"""NameServer: the route table served over a transport, plus the broker liveness scan."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from .. import runtime
from ..data_paths import check_writable_file, data_path_error
from ..metrics.exporter import MetricsExporter
from ..plugins import PluginHost, load_plugins
from ..remoting.connection import Connection
from ..remoting.processor import ProcessorTable
from ..remoting.server import RemotingServer
from .config import NamesrvConfig
from .kvconfig import KVConfig
from .routes import RouteTable

if TYPE_CHECKING:
    from ..acl.service import AclService

log = logging.getLogger("rocketmq.namesrv")


class NameServer:
    """One name server: ``run`` it in a task group, or use ``NameServer.serving``.

    ``clock`` returns seconds (monotonic); tests may pass their own.
    """

    def __init__(
        self,
        config: NamesrvConfig | None = None,
        *,
        host: PluginHost | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or NamesrvConfig()
        self.host = host or load_plugins()
        self.routes = RouteTable()
        self.kv = KVConfig(self.config.kv_config_path)
        self.address: str | None = None
        self.server: RemotingServer | None = None
        self.acl: AclService | None = None  # the ACL rules and their guard (aclEnable)
        self.metrics_address: str | None = None  # the PROM endpoint (metricsExporterType)
        self._clock = clock
        self._task_group: TaskGroup | None = None
        self._apply_config()

    def now(self) -> float:
        """Milliseconds on the liveness clock."""
        return self._clock() * 1000.0

    @classmethod
    def serving(
        cls, config: NamesrvConfig | None = None, **options: Any
    ) -> AbstractAsyncContextManager[NameServer]:
        """A started name server, stopped gracefully when the block exits."""
        return runtime.serving(cls(config, **options))

    async def run(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``stop``; reports the bound ``host:port`` through task_status."""
        self.host.require_healthy()
        await anyio.to_thread.run_sync(self._check_data_paths)
        try:
            self.kv.load()
        except OSError as exc:  # a file the checks could not foresee (permissions)
            raise data_path_error(exc, "kvConfigPath", self.config.kv_config_path) from exc
        self.config.validate_endpoints()
        metrics = self._metrics_exporter()
        transports = self.host.registry.transports.get
        transport = transports(self.config.transport)
        tls = self.config.tls_for(transport.name)  # TCP: as tls.server.mode says
        hooks = await self._open_acl()
        self.server = RemotingServer(
            transport,
            self.processor_table(),
            hooks=hooks,
            tls=tls,
            limits=self.config.server_limits(),
        )
        self.server.on_connection_closed(self._connection_closed)
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            self.address = await task_group.start(
                partial(self.server.serve, extra=self.config.listeners(transports)),
                self.config.bind_address,
                self.config.listen_port,
            )
            if metrics is not None:
                metrics.base["node_id"] = self.address
                self.metrics_address = await task_group.start(metrics.run)
                metrics.source.attach()
            task_group.start_soon(self._scan_not_active_brokers)
            if self.acl is not None:
                task_group.start_soon(self.acl.watch)
            self.host.hook.rocketmq_namesrv_started(namesrv=self, address=self.address)
            task_status.started(self.address)

    def _metrics_exporter(self) -> MetricsExporter | None:
        """The exporter metricsExporterType asks for (node_type "nameserver"), or None."""
        plan = self.config.metrics_plan(self.config.bind_address)
        if not plan.enabled:
            return None
        from ..metrics.namesrv_meter import NamesrvMeter

        # no cluster label: a name server serves every cluster; node_id: its address
        labels = plan.base_labels("nameserver", "", None)
        return MetricsExporter(plan, NamesrvMeter(self), labels)

    async def _open_acl(self) -> tuple[Any, ...]:
        """With aclEnable, the rules (a ConfigError if they cannot be used) and the RPC
        hook that guards route and config changes with them."""
        if not self.config.acl_enable:
            self.acl = None
            return ()
        # the ACL service (and the YAML behind its rules) loads only when aclEnable asks
        from ..acl.rules import acl_home
        from ..acl.service import AclService

        self.acl = AclService.for_namesrv(
            acl_home(self.config.rocketmq_home), self.config.acl_file_watch_interval / 1000
        )
        await self.acl.open()
        return (self.acl.guard,)

    def _check_data_paths(self) -> None:
        """ConfigErrors naming the setting, before a write fails minutes later."""
        check_writable_file(self.config.kv_config_path, "kvConfigPath")
        check_writable_file(self.config.config_store_path, "configStorePath")

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, answer what was read, close every connection."""
        if self._task_group is None:
            return
        self.host.hook.rocketmq_namesrv_stopping(namesrv=self)
        if self.server is not None:
            await self.server.stop(grace)
        await self.kv.persist()
        self._task_group.cancel_scope.cancel()
        self._task_group = None

    def processor_table(self) -> ProcessorTable:
        """Every namesrv processor the plugins registered, bound to this server."""
        return self.host.processor_table("namesrv", self)

    # --- liveness ------------------------------------------------------------------------

    def _connection_closed(self, connection: Connection) -> None:
        for addr in self.routes.remove_channel(connection):
            log.info("broker %s left: its connection closed", addr)

    async def _scan_not_active_brokers(self) -> None:
        while True:
            await anyio.sleep(self.config.scan_not_active_broker_interval / 1000)
            for addr, channel in self.routes.expire(self.now()):
                log.warning(
                    "broker %s expired: silent for more than %d ms",
                    addr,
                    self.routes.broker_channel_expired_time,
                )
                if isinstance(channel, Connection) and self._task_group is not None:
                    self._task_group.start_soon(channel.aclose)  # as Java closes the channel

    # --- configuration -------------------------------------------------------------------

    def _apply_config(self) -> None:
        self.routes.broker_channel_expired_time = self.config.broker_channel_expired_time
        self.routes.delete_topic_with_broker_registration = (
            self.config.delete_topic_with_broker_registration
        )

    def config_text(self) -> str:
        return self.config.to_text()

    async def config_updated(self) -> None:
        """UPDATE_NAMESRV_CONFIG changed the settings: apply them, persist to
        ``configStorePath``."""
        self._apply_config()
        await self.config.save(self.config.config_store_path)
