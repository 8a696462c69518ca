"""A cluster with the gRPC proxy in front of it (cluster mode, its own thread), per module."""

from __future__ import annotations

import grpc
import pytest
from rocketmq_proxy_grpc.server import GrpcProxy, ProxyThread
from rocketmq_proxy_grpc.v2 import service_pb2_grpc

from rocketmq_core.testing.cluster import EmbeddedCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module: its tests keep apart by their own topic names."""
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def proxy(cluster):
    runner = ProxyThread(
        GrpcProxy(cluster.namesrv_address, host="127.0.0.1", port=0, advertised_host="127.0.0.1")
    )
    port = runner.start()
    yield port
    runner.stop()


@pytest.fixture(scope="module")
def stub(proxy):
    with grpc.insecure_channel(f"127.0.0.1:{proxy}") as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)
