"""Local mode with aclEnable: the broker starts the proxy (grpcServerPort), which checks
the 5.x clients' signed metadata against the broker's plain_acl.yml."""

from __future__ import annotations

import textwrap
import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from grpc_requests import access_point, message, metadata, resource
from rocketmq_proxy_grpc.acl import signature
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc

from rocketmq_core.testing.cluster import EmbeddedCluster

RULES = """\
accounts:
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB]
  - accessKey: consumer-key
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [CG=SUB]
  - accessKey: proxy-key
    secretKey: proxy-secret
    admin: true
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(textwrap.dedent(RULES))
    with EmbeddedCluster(
        tmp_path_factory.mktemp("cluster"),
        acl_enable=True,
        rocketmq_home=str(home),
        inner_client_authentication_credentials='{"accessKey": "proxy-key",'
        ' "secretKey": "proxy-secret"}',
        grpc_server_port=0,  # local mode, on any free port
    ) as running:
        running.create_topic("Orders")
        running.create_topic("Payments")
        yield running


@pytest.fixture(scope="module")
def grpc_port(cluster):
    return cluster.broker.services["grpc_proxy"].port


@pytest.fixture(scope="module")
def stub(grpc_port):
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


def signed(access_key: str, secret_key: str) -> list[tuple[str, str]]:
    date_time = time.strftime("%Y%m%dT%H%M%SZ")
    authorization = (
        f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time,"
        f" Signature={signature(secret_key, date_time)}"
    )
    return [*metadata(), ("x-mq-date-time", date_time), ("authorization", authorization)]


def send(stub, topic: str, headers) -> pb.Status:
    request = spb.SendMessageRequest(messages=[message(topic, b"acl")])
    return stub.SendMessage(request, metadata=headers).status


def test_a_signed_send_with_permission_is_stored(stub):
    status = send(stub, "Orders", signed("producer-key", "producer-secret"))
    assert status.code == pb.OK, status.message


def test_bad_or_missing_signatures_are_unauthorized(stub):
    wrong = send(stub, "Orders", signed("producer-key", "not-the-secret"))
    assert wrong.code == pb.UNAUTHORIZED
    assert "producer-key" in wrong.message
    unknown = send(stub, "Orders", signed("nobody", "x"))
    assert unknown.code == pb.UNAUTHORIZED
    # what the 5.x client sends without credentials: an empty Credential
    empty = [*metadata(), ("authorization", "MQv2-HMAC-SHA1 Credential=, Signature=00")]
    assert send(stub, "Orders", empty).code == pb.UNAUTHORIZED
    assert send(stub, "Orders", metadata()).code == pb.UNAUTHORIZED


def test_permissions_on_topics_and_groups(stub, grpc_port):
    refused = send(stub, "Payments", signed("producer-key", "producer-secret"))
    assert refused.code == pb.FORBIDDEN
    assert "topic:Payments" in refused.message

    def receive(group: str) -> list:
        request = spb.ReceiveMessageRequest(
            group=resource(group),
            message_queue=pb.MessageQueue(
                topic=resource("Orders"),
                broker=pb.Broker(name="broker-a", endpoints=access_point(grpc_port)),
            ),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=4,
            invisible_duration=Duration(seconds=30),
            long_polling_timeout=Duration(seconds=5),
        )
        headers = signed("consumer-key", "consumer-secret")
        return list(stub.ReceiveMessage(request, metadata=headers, timeout=10))

    assert send(stub, "Orders", signed("producer-key", "producer-secret")).code == pb.OK
    allowed = receive("CG")
    assert allowed[0].status.code == pb.OK, allowed[0].status.message
    denied = receive("OtherGroup")
    assert [r.status.code for r in denied] == [pb.FORBIDDEN]
    assert "group:OtherGroup" in denied[0].status.message
