"""A name server and a broker serving from a thread of their own.

For code that talks to them through blocking clients (the C++ client, the SDK's
blocking facade, a test suite that is not async): the event loop runs in a background
thread, so the caller's thread may block freely.

    with EmbeddedCluster(tmp_path) as cluster:
        producer.set_namesrv_addr(cluster.namesrv_address)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ..broker.app import Broker
from ..namesrv.server import NameServer
from ..plugins import PluginHost, load_plugins
from ..protocol.bodies import TopicConfig
from ..protocol.constants import PERM_RW
from .broker import broker_config
from .namesrv import namesrv_config

T = TypeVar("T")


class EmbeddedCluster:
    def __init__(
        self,
        directory: Path,
        *,
        backend: str = "asyncio",
        host: PluginHost | None = None,
        namesrv_overrides: dict[str, Any] | None = None,
        **broker_overrides: Any,
    ) -> None:
        self.directory = Path(directory)
        self.backend = backend
        self.host = host or load_plugins()
        self.namesrv_overrides = namesrv_overrides or {}
        self.broker_overrides = broker_overrides
        self.namesrv: NameServer | None = None
        self.broker: Broker | None = None
        self._stack = ExitStack()
        self._broker_stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None

    def __enter__(self) -> EmbeddedCluster:
        try:
            self._portal = self._stack.enter_context(start_blocking_portal(self.backend))
            self.namesrv = self._stack.enter_context(
                self._portal.wrap_async_context_manager(
                    NameServer.serving(
                        namesrv_config(self.directory / "namesrv", **self.namesrv_overrides),
                        host=self.host,
                    )
                )
            )
            self.start_broker()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_broker()
        self._stack.close()

    @property
    def namesrv_address(self) -> str:
        assert self.namesrv is not None and self.namesrv.address is not None
        return self.namesrv.address

    def namesrv_endpoint(self, scheme: str) -> str:
        """The name server's ``scheme://host:port`` (an extra listener), as clients dial it."""
        assert self.namesrv is not None and self.namesrv.server is not None
        for address in self.namesrv.server.extra_addresses:
            if address.startswith(f"{scheme}://"):
                return address
        raise LookupError(f"the name server has no {scheme} listener")

    @property
    def broker_address(self) -> str:
        assert self.broker is not None and self.broker.address is not None
        return self.broker.address

    def start_broker(self) -> Broker:
        """Start the broker on its store directory (again, after ``stop_broker``)."""
        assert self._portal is not None, "enter the cluster first"
        config = broker_config(
            self.directory / "broker", self.namesrv_address, **self.broker_overrides
        )
        stack = ExitStack()
        self.broker = stack.enter_context(
            self._portal.wrap_async_context_manager(Broker.serving(config, host=self.host))
        )
        # keep the ports across restarts so that clients find it where they left it; the HA
        # and VIP ports too (bound ports are written back): listenPort + 1 or - 2 may be
        # anyone's by then
        bound = self.broker.config
        self.broker_overrides["listen_port"] = bound.listen_port
        if bound.ha_listen_port:
            self.broker_overrides["ha_listen_port"] = bound.ha_listen_port
        if bound.fast_listen_port:
            self.broker_overrides["fast_listen_port"] = bound.fast_listen_port
        if self.broker.server is not None and self.broker.server.extra_addresses:
            self.broker_overrides["extra_listeners"] = ";".join(self.broker.server.extra_addresses)
        self._broker_stack = stack
        return self.broker

    def stop_broker(self) -> None:
        """Stop the broker gracefully: unregister, persist offsets, close the store."""
        if self._broker_stack is not None:
            self._broker_stack.close()
            self._broker_stack = None

    def restart_broker(self) -> Broker:
        self.stop_broker()
        return self.start_broker()

    def create_topic(self, topic: str, queues: int = 4, timeout: float = 10.0) -> None:
        """Create ``topic`` on the broker and wait until the name server routes it."""
        broker, namesrv = self.broker, self.namesrv
        assert broker is not None and namesrv is not None, "enter the cluster first"

        async def create() -> None:
            broker.topics.update(TopicConfig(topic, queues, queues, int(PERM_RW)))
            with anyio.fail_after(timeout):
                while namesrv.routes.route(topic) is None:
                    await anyio.sleep(0.01)

        self.call(create)

    def call(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``function(*args)`` in the cluster's event loop and return its result."""
        assert self._portal is not None, "enter the cluster first"
        return self._portal.call(function, *args)


def quic_listener_settings(cert_file: str, key_file: str) -> dict[str, str]:
    """Settings that make a name server or broker serve QUIC beside TCP, on any port:
    ``EmbeddedCluster(..., namesrv_overrides=settings, **settings)``."""
    return {
        "extra_listeners": "quic://127.0.0.1:0",
        "tls_server_cert_path": cert_file,
        "tls_server_key_path": key_file,
    }
