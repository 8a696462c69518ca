"""Clients of one Spark Python process, started on first use and kept for the next task,
and many of their calls awaited at once (bounded_gather).

Spark reuses its Python workers, so a reader or writer opens its connections lazily,
from here, never in ``__init__`` (which must stay picklable): one blocking client per
(kind, connection, group), all on the SDK's shared loop thread, shut down at exit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rocketmq_core.client import sync

from .options import Connection

_clients: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()
_pid = os.getpid()


def _cached(key: tuple[Any, ...], make: Any) -> Any:
    global _pid
    with _lock:
        if _pid != os.getpid():  # a forked worker must not use its parent's loop thread
            _clients.clear()
            _pid = os.getpid()
        client = _clients.get(key)
        if client is None:
            client = make()
            client.start()
            _clients[key] = client
        return client


def shutdown_all() -> None:
    """Shut down every client this process keeps (an embedding process, a test module
    done with Spark); the next use starts new ones."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.shutdown()


def pull_consumer(connection: Connection, group: str) -> sync.PullConsumer:
    return _cached(
        ("pull", connection, group),
        lambda: sync.PullConsumer(group, config=connection.client_config()),
    )


def admin(connection: Connection) -> sync.Admin:
    return _cached(("admin", connection), lambda: sync.Admin(config=connection.client_config()))


def transaction_producer(
    connection: Connection, group: str, send_timeout: float, checker: Any
) -> Any:
    """A TransactionProducer whose checker answers the broker's check-backs for as long
    as this worker lives: that is how halves a lost task left behind get resolved. Plain
    writes send through it too: a broker asks any producer of a half's group about it,
    and a plain producer could not answer."""
    return _cached(
        ("transaction", connection, group, send_timeout),
        lambda: sync.TransactionProducer(
            group,
            config=connection.client_config(),
            send_timeout=send_timeout,
            executor=_undecided,
            checker=checker,
        ),
    )


async def bounded_gather(
    function: Callable[[Any], Awaitable[Any]], items: Sequence[Any], limit: int
) -> list[Any]:
    """``[await function(item) for item in items]`` with up to ``limit`` awaited at once,
    results in the items' order; run it on a client's loop with ``client.call``."""
    import anyio

    results: list[Any] = [None] * len(items)
    limiter = anyio.CapacityLimiter(limit)

    async def one(index: int) -> None:
        async with limiter:
            results[index] = await function(items[index])

    async with anyio.create_task_group() as group:
        for index in range(len(items)):
            group.start_soon(one, index)
    return results


def _undecided(message: Any, arg: Any) -> None:
    return None  # the driver decides, once Spark commits the batch
