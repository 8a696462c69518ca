"""Local mode: a broker with grpcServerPort starts the proxy beside it."""

from __future__ import annotations

import logging
import socket
import time

import anyio
import grpc
import pytest
from grpc_requests import access_point, metadata, resource
from rocketmq_proxy_grpc.renewals import Renewals
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc

from rocketmq_core.testing.cluster import EmbeddedCluster


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_broker_serves_grpc_on_its_grpc_server_port(tmp_path, backend):
    """grpc.aio needs asyncio: a broker on asyncio serves gRPC from its own loop, beside
    a broker on trio the proxy has a loop of its own."""
    with EmbeddedCluster(tmp_path, backend=backend, grpc_server_port=0) as cluster:
        cluster.create_topic("LocalGrpc")
        service = cluster.broker.services["grpc_proxy"]
        assert service.serving
        assert (service.thread is not None) == (backend == "trio")
        port = service.port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            answer = stub.QueryRoute(
                spb.QueryRouteRequest(topic=resource("LocalGrpc"), endpoints=access_point(port)),
                metadata=metadata(),
            )
    assert answer.status.code == pb.OK
    assert len(answer.message_queues) == 4


# TLS on: the port is the TLS listener's (tls_front.py); test mode makes its certificate
@pytest.mark.parametrize(
    "tls",
    [{}, {"tls_config_file": "", "tls_server_mode": "permissive"}],
    ids=["plain", "tls"],
)
def test_a_taken_grpc_port_leaves_the_broker_serving(tmp_path, caplog, tls):
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with (
            caplog.at_level(logging.WARNING, "rocketmq.proxy"),
            EmbeddedCluster(tmp_path, grpc_server_port=taken, **tls) as cluster,
        ):
            assert cluster.broker.ready
            assert not cluster.broker.services["grpc_proxy"].serving
    assert f"0.0.0.0:{taken}" in caplog.text
    assert "no gRPC proxy beside this broker" in caplog.text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_grpc_failure_after_it_started_leaves_the_broker_serving(
    tmp_path, backend, caplog, monkeypatch
):
    async def broken(self):
        await anyio.sleep(0.2)
        raise RuntimeError("renewals broke")

    monkeypatch.setattr(Renewals, "run", broken)
    with (
        caplog.at_level(logging.ERROR, "rocketmq.proxy"),
        EmbeddedCluster(tmp_path, backend=backend, grpc_server_port=0) as cluster,
    ):
        service = cluster.broker.services["grpc_proxy"]
        deadline = time.monotonic() + 5
        while "the gRPC proxy stopped" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.create_topic("AfterGrpc")  # remoting still serves
        assert cluster.broker.ready
    assert "the gRPC proxy stopped" in caplog.text
    assert "renewals broke" in caplog.text
    assert not service.serving
