"""The gRPC server: MessagingService on grpc.aio, in front of the brokers of a name
server. grpc.aio needs asyncio, so the proxy runs on asyncio: in the caller's loop
(``rocketmq proxy``) or in a thread of its own (``ProxyThread``, beside a broker that
may run on trio)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

import anyio
import grpc
import sniffio
from anyio.abc import TaskStatus

from rocketmq_core.acl.service import AclService
from rocketmq_core.client.config import ClientConfig, local_ip
from rocketmq_core.client.instance import ClientInstance
from rocketmq_core.errors import ConfigError
from rocketmq_core.remoting.transport import TlsOptions, Transport, parse_address

from .acl import GrpcAclVerifier
from .io_threads import GrpcThreadPriority
from .local import DEFAULT_GRPC_PORT
from .local_clients import LocalConsumers
from .routes import endpoints_of
from .service import MessagingService
from .tls_front import BACKEND_HOST, TlsFront, serves_tls
from .v2 import service_pb2_grpc

log = logging.getLogger("rocketmq.proxy")

MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024  # grpcMaxInboundMessageSize
STOP_GRACE = 3.0


class GrpcProxy:
    """Serves ``apache.rocketmq.v2.MessagingService`` on ``host:port`` (0: any free
    port) for the brokers that ``namesrv_addr`` knows; with ``tls`` (its mode not
    disabled) through a TlsFront on ``transport`` (TCP)."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_GRPC_PORT,
        advertised_host: str | None = None,
        client_config: ClientConfig | None = None,
        acl: AclService | None = None,
        tls: TlsOptions | None = None,
        transport: Transport | None = None,
        local_broker: Any = None,
    ) -> None:
        # behind a TLS front grpc.aio listens on loopback only (tls_front.py)
        self.front: TlsFront | None = None
        if serves_tls(tls):
            if transport is None:
                raise ConfigError("TLS on the gRPC port needs the tcp transport plugin")
            self.front = TlsFront(transport, tls)
        self.host = host
        self.port = port
        self.advertised_host = advertised_host or local_ip()
        self.client_config = client_config or ClientConfig(
            namesrv_addr=namesrv_addr, instance_name="rocketmq-grpc-proxy"
        )
        self.acl = acl  # ACL on: the rules that signed metadata is checked against
        # local mode on the broker's own event loop: its 5.x consumers go in its table
        self.local_broker = local_broker
        self.service: MessagingService | None = None
        self.backend_port: int | None = None  # behind a TLS front: grpc.aio's loopback port
        self.thread_priority = GrpcThreadPriority()  # grpc's threads below the event loop

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; reports the bound port."""
        front = self.front
        async with (
            ClientInstance(self.client_config) as instance,
            anyio.create_task_group() as relays,
        ):
            server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", MAX_INBOUND_MESSAGE_SIZE),
                    ("grpc.max_send_message_length", -1),
                    ("grpc.so_reuseport", 0),
                ]
            )
            bound = self._bind(server, front)
            acl = self.acl
            verifier = GrpcAclVerifier(lambda: acl.rules) if acl is not None else None
            local = LocalConsumers(self.local_broker) if self.local_broker is not None else None
            self.service = MessagingService(
                instance,
                endpoints_of(self.advertised_host, bound),
                verifier,
                peer_of=front.client_of if front else None,
                local=local,
            )
            service_pb2_grpc.add_MessagingServiceServicer_to_server(self.service, server)
            await server.start()
            relays.start_soon(self.thread_priority.run)
            try:
                if front is not None:
                    self.backend_port = bound
                    public = await relays.start(front.serve, self.host, self.port, bound, relays)
                    bound = parse_address(public)[1]
                    self.service.endpoints = endpoints_of(self.advertised_host, bound)
                self.port = bound
                tls = f" (TLS {front.tls.mode})" if front else ""
                log.info("gRPC proxy serving on %s:%d%s", self.host, bound, tls)
                task_status.started(bound)
                await self.service.consuming.renewals.run()
            finally:
                if front is not None:
                    front.stop_accepting()
                with anyio.CancelScope(shield=True):
                    # the calls in flight end within the grace, relayed ones too
                    await server.stop(STOP_GRACE)
                relays.cancel_scope.cancel()
                if local is not None:
                    local.close()

    def _bind(self, server: grpc.aio.Server, front: TlsFront | None) -> int:
        if front is not None:  # any free loopback port: the front binds the public one
            try:
                return server.add_insecure_port(f"{BACKEND_HOST}:0")
            except RuntimeError as exc:
                raise ConfigError(f"no loopback port for the gRPC server ({exc})") from None
        try:
            return server.add_insecure_port(f"{self.host}:{self.port}")
        except RuntimeError as exc:
            raise ConfigError(
                f"the gRPC port {self.host}:{self.port} cannot be bound ({exc}):"
                " free it or pass another --grpc-port"
            ) from None


class ProxyThread:
    """A GrpcProxy on an asyncio loop of its own thread: ``start`` blocks until it
    serves (or raises why it cannot), ``stop`` until it has stopped."""

    def __init__(self, proxy: GrpcProxy) -> None:
        self.proxy = proxy
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> int:
        self._thread = threading.Thread(target=self._run, name="rocketmq-grpc-proxy", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise _the_one_error(self._error)
        return self.proxy.port

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to start(), or logged once running
            if not self._ready.is_set():
                self._error = exc
            else:
                log.error("the gRPC proxy stopped", exc_info=exc)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with anyio.create_task_group() as group:
            await group.start(self.proxy.serve)
            self._ready.set()
            await self._stop.wait()
            group.cancel_scope.cancel()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            # RuntimeError: it closed meanwhile, the proxy stopped on its own
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(STOP_GRACE + 5)


class LocalProxyService:
    """The broker service of local mode: the proxy, beside the broker, for the brokers of
    the broker's name servers (grpcServerPort).

    A broker on asyncio serves gRPC from its own event loop: one thread that holds the
    GIL for both, instead of two that hand it to each other for every request (grpc-send
    ~15% more messages a second on one core). Beside a broker on trio the proxy has an
    asyncio loop in a thread of its own."""

    def __init__(self, broker: Any, port: int) -> None:
        self.broker = broker
        self.port = port
        self._serving = False  # False when the port could not be bound, or after a failure
        self.thread: ProxyThread | None = None

    @property
    def serving(self) -> bool:
        return self._serving and (self.thread is None or self.thread.alive())

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        config = self.broker.config
        tls = config.tls_for("tcp")
        # grpc.aio needs asyncio: on the broker's own loop when it runs one, else a thread
        same_loop = sniffio.current_async_library() == "asyncio"
        proxy = GrpcProxy(
            config.namesrv_addr,
            port=self.port,
            advertised_host=config.broker_ip1,
            # the broker's own signing keys, for brokers with aclEnable
            client_config=ClientConfig(
                namesrv_addr=config.namesrv_addr,
                instance_name="rocketmq-grpc-proxy",
                credentials=config.inner_client_credentials(),
                tls=config.client_tls(),  # as the broker's own connections (tls.enable)
            ),
            acl=self.broker.acl,  # the broker's rules, which its watcher keeps current
            # tls.server.mode serves the gRPC port too, as in Apache's proxy
            tls=tls,
            transport=self.broker.host.registry.transports.get("tcp") if serves_tls(tls) else None,
            # one loop: the broker's tables may be touched (from a thread they may not)
            local_broker=self.broker if same_loop else None,
        )
        if same_loop:
            await self._serve_in_this_loop(proxy, task_status)
        else:
            await self._serve_in_a_thread(proxy, task_status)

    async def _serve_in_this_loop(self, proxy: GrpcProxy, task_status: TaskStatus[None]) -> None:
        try:
            async with anyio.create_task_group() as group:
                try:
                    self.port = await group.start(proxy.serve)
                except Exception as exc:
                    cause = _the_one_error(exc)
                    if not isinstance(cause, ConfigError):
                        raise
                    self._unavailable(cause)
                    task_status.started()
                    return
                self._serving = True
                task_status.started()
        except Exception as exc:
            if not self._serving:
                raise  # why it could not start
            # once it served, a failure ends gRPC alone, as in the proxy's thread: the
            # broker goes on serving remoting
            self._serving = False
            log.error("the gRPC proxy stopped", exc_info=_the_one_error(exc))

    async def _serve_in_a_thread(self, proxy: GrpcProxy, task_status: TaskStatus[None]) -> None:
        self.thread = ProxyThread(proxy)
        try:
            self.port = await anyio.to_thread.run_sync(self.thread.start)
        except ConfigError as exc:
            self._unavailable(exc)
            self.thread = None
            task_status.started()
            return
        self._serving = True
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.thread.stop)

    @staticmethod
    def _unavailable(exc: ConfigError) -> None:
        # gRPC is an addition to the broker: another broker of this machine may hold
        # the port (8081 by default), and this one still serves remoting
        log.warning("no gRPC proxy beside this broker: %s (grpcServerPort)", exc)


def _the_one_error(error: BaseException) -> BaseException:
    """What task groups wrapped, when they wrapped one error only."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error
