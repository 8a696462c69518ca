"""What servers receive, recorded as it arrived, and its signature checked (ACL.md §1):
for the tests of the clients that sign (tests/client/test_signing.py, the Spark plugin's)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rocketmq_core.acl.signing import ACCESS_KEY, Credentials, signature_matches
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.server import RemotingServer


class RequestLog:
    """A copy of every request a server's processors receive, as it arrived."""

    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self._lock = threading.Lock()  # the servers run in the cluster's thread

    def keep(self, request: RemotingCommand) -> None:
        copy = RemotingCommand(
            request.code,
            ext_fields=dict(request.ext_fields),
            body=bytes(request.body),
            version=request.version,
        )
        with self._lock:
            self.requests.append(copy)

    def codes(self) -> set[int]:
        with self._lock:
            return {request.code for request in self.requests}

    def snapshot(self) -> list[RemotingCommand]:
        with self._lock:
            return list(self.requests)


@contextmanager
def recording(*servers: RemotingServer) -> Iterator[RequestLog]:
    """Record what the servers' processors receive inside the block (each still answers);
    the processors are as they were afterwards."""
    log = RequestLog()
    routes = {}
    for server in servers:
        table = server.processors
        routes.update({id(route): route for route in map(table.lookup, table.codes())})
    originals = {key: route.processor for key, route in routes.items()}
    for key, route in routes.items():
        route.processor = functools.partial(_kept_then_processed, log, originals[key])
    try:
        yield log
    finally:
        for key, route in routes.items():
            route.processor = originals[key]


def _kept_then_processed(log: RequestLog, processor, ctx, request: RemotingCommand):
    log.keep(request)
    return processor(ctx, request)


def assert_signed_by(requests: list[RemotingCommand], credentials: Credentials) -> None:
    assert requests
    for request in requests:
        name = RequestCode(request.code).name
        assert request.ext_fields.get(ACCESS_KEY) == credentials.access_key, name
        assert signature_matches(request, credentials.secret_key), name
        assert not signature_matches(request, credentials.secret_key + "x"), name
