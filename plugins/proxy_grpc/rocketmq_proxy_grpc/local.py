"""Local mode's broker service factory, light to import: grpc and the generated modules
load only for a broker that serves gRPC (every ``rocketmq`` command loads the plugins)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("rocketmq.proxy")

DEFAULT_GRPC_PORT = 8081  # RocketMQ's grpcServerPort


def local_proxy(broker: Any) -> Any:
    """The gRPC proxy beside ``broker`` (its grpcServerPort), or None when it has none."""
    port = getattr(broker.config, "grpc_server_port", -1)
    if port is None or port < 0:
        return None
    if not broker.config.namesrv_addr:  # the proxy finds brokers by their routes
        log.warning("grpcServerPort=%d but no namesrvAddr: no gRPC proxy", port)
        return None
    from .server import LocalProxyService

    return LocalProxyService(broker, port)
