"""The PROM endpoint: Prometheus text (OpenMetrics when asked) over HTTP/1.1, on anyio.

h11 keeps the HTTP state; prometheus_client writes the exposition; the collection runs
on the event loop, where the broker's tables live. Paths as RocketMQ's
PrometheusHttpServer: ``/`` and ``/metrics`` serve the metrics, ``/-/healthy`` says the
exporter is healthy; anything else is 404.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
import h11
from anyio.abc import SocketStream, TaskStatus

from ..errors import ConfigError

log = logging.getLogger("rocketmq.metrics")

HEALTHY = b"Exporter is healthy.\n"
MAX_REQUEST_BYTES = 64 * 1024
READ_TIMEOUT = 30.0  # seconds an idle keep-alive connection stays open

# the body and its content type for an Accept header
Render = Callable[[str], Awaitable[tuple[bytes, str]]]


async def serve_metrics(
    host: str,
    port: int,
    render: Render,
    *,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``render``'s output on ``host:port``; reports the bound ``host:port``."""
    try:
        listener = await anyio.create_tcp_listener(
            local_host=host, local_port=port, reuse_port=False
        )
    except OSError as exc:
        raise ConfigError(
            f"metricsPromExporterHost:metricsPromExporterPort {host}:{port} cannot be bound"
            f" ({exc.strerror or exc}): choose a free port or another address"
        ) from None
    async with listener:
        bound = listener.extra(anyio.abc.SocketAttribute.local_address)
        assert isinstance(bound, tuple)  # a TCP listener's (host, port[, ...])
        task_status.started(f"{bound[0]}:{bound[1]}")
        await listener.serve(partial(_serve_connection, render=render))


async def _serve_connection(stream: SocketStream, *, render: Render) -> None:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    async with stream:
        try:
            while True:
                request = await _next_request(stream, connection)
                if request is None:
                    return
                status, body, content_type = await _answer(request, render)
                await _send(stream, connection, request, status, body, content_type)
                if connection.our_state is not h11.IDLE:
                    connection.start_next_cycle()
        except (
            h11.ProtocolError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            TimeoutError,
        ):
            return  # a client that went away or spoke garbage: nothing to answer


async def _next_request(stream: SocketStream, connection: h11.Connection) -> h11.Request | None:
    request = None
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            with anyio.fail_after(READ_TIMEOUT):
                try:
                    data = await stream.receive()
                except anyio.EndOfStream:
                    data = b""
            connection.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.EndOfMessage):
            return request
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None


async def _answer(request: h11.Request, render: Render) -> tuple[int, bytes, str]:
    path = request.target.split(b"?", 1)[0]
    if request.method not in (b"GET", b"HEAD"):
        return 405, b"only GET and HEAD\n", "text/plain; charset=utf-8"
    if path == b"/-/healthy":
        return 200, HEALTHY, "text/plain; charset=utf-8"
    if path not in (b"/", b"/metrics"):
        return 404, b"not found: the metrics are at /metrics\n", "text/plain; charset=utf-8"
    accept = ""
    for name, value in request.headers:
        if name == b"accept":
            accept = value.decode("latin-1")
    try:
        body, content_type = await render(accept)
    except Exception:
        log.exception("metrics collection failed")
        return (
            500,
            b"metrics collection failed; see the server's log\n",
            "text/plain; charset=utf-8",
        )
    return 200, body, content_type


async def _send(
    stream: SocketStream,
    connection: h11.Connection,
    request: h11.Request,
    status: int,
    body: bytes,
    content_type: str,
) -> None:
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    data = connection.send(h11.Response(status_code=status, headers=headers))
    if request.method != b"HEAD":
        data += connection.send(h11.Data(data=body))
    data += connection.send(h11.EndOfMessage())
    await stream.send(data)
