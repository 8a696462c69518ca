"""Messages cross protocols: the C++ 4.x client (remoting) and gRPC through the proxy."""

from __future__ import annotations

import pytest
from grpc_requests import message, metadata, receive
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb

from tests.cpp_client import load_cpp_client
from tests.interop.cpp import CollectingConsumer
from tests.interop.cpp import message as cpp_message
from tests.interop.cpp import producer as cpp_producer


@pytest.fixture(scope="module")
def client():
    return load_cpp_client()


def test_cpp_producer_to_grpc_receiver(client, cluster, stub, proxy):
    cluster.create_topic("CppToGrpc")
    with cpp_producer(client, cluster.namesrv_address) as sender:
        sent = [sender.send_sync(cpp_message(client, "CppToGrpc", n, "TagC")) for n in range(5)]
    assert [r.status for r in sent] == [client.SendStatus.OK] * 5
    received = []
    for _ in range(5):
        responses = receive(stub, "CppToGrpc", "GID-cpp-to-grpc", proxy)
        received += [r.message for r in responses if r.WhichOneof("content") == "message"]
        if len(received) >= 5:
            break
    assert sorted(m.body for m in received) == [f"body-{n}".encode() for n in range(5)]
    assert {m.system_properties.message_id for m in received} == {r.msg_id for r in sent}
    third = next(m for m in received if m.body == b"body-3")
    assert third.system_properties.tag == "TagC"
    assert list(third.system_properties.keys) == ["key-3"]
    assert third.user_properties["seq"] == "3"


def test_grpc_producer_to_cpp_consumer(client, cluster, stub):
    cluster.create_topic("GrpcToCpp")
    sent = []
    for n in range(5):
        outgoing = message("GrpcToCpp", f"grpc-{n}".encode(), tag="TagG")
        outgoing.user_properties["seq"] = str(n)
        answer = stub.SendMessage(spb.SendMessageRequest(messages=[outgoing]), metadata=metadata())
        assert answer.status.code == pb.OK, answer.status.message
        sent.append(outgoing)
    with CollectingConsumer(client, cluster.namesrv_address, "CID-grpc-to-cpp", "GrpcToCpp") as c:
        received = c.wait_for(5)
    assert sorted(item.body for item in received) == [f"grpc-{n}".encode() for n in range(5)]
    assert {item.tags for item in received} == {b"TagG"}
    assert sorted(item.seq for item in received) == [str(n).encode() for n in range(5)]
