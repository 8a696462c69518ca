"""What the tests send the proxy: metadata as a 5.x client sends it, and messages."""

from __future__ import annotations

import uuid

from google.protobuf.duration_pb2 import Duration
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb

CLIENT_ID = "test-host@1@0@proxy"


def metadata(client_id: str = CLIENT_ID) -> list[tuple[str, str]]:
    return [
        ("x-mq-client-id", client_id),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
        ("x-mq-client-version", "5.1.2"),
        ("x-mq-request-id", str(uuid.uuid4())),
    ]


def resource(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def access_point(port: int) -> pb.Endpoints:
    return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])


def message(topic: str, body: bytes, *, tag: str | None = None, group: str | None = None):
    system = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(),
        body_encoding=pb.IDENTITY,
        message_type=pb.FIFO if group else pb.NORMAL,
    )
    system.born_timestamp.GetCurrentTime()
    if tag:
        system.tag = tag
    if group:
        system.message_group = group
    return pb.Message(topic=resource(topic), system_properties=system, body=body)


def receive(
    stub, topic: str, group: str, proxy: int, *, invisible_s: int = 30, auto_renew: bool = False
):
    """ReceiveMessage's whole stream; ``auto_renew`` as a push consumer asks (no duration)."""
    request = spb.ReceiveMessageRequest(
        group=resource(group),
        message_queue=pb.MessageQueue(
            topic=resource(topic),
            id=0,
            permission=pb.READ_WRITE,
            broker=pb.Broker(name="broker-a", id=0, endpoints=access_point(proxy)),
        ),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=16,
        long_polling_timeout=Duration(seconds=5),
        auto_renew=auto_renew,
    )
    if not auto_renew:
        request.invisible_duration.CopyFrom(Duration(seconds=invisible_s))
    return list(stub.ReceiveMessage(request, metadata=metadata(), timeout=10))
