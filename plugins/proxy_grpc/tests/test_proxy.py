"""The gRPC proxy against a real cluster, called with our own generated stubs (the
official 5.x client's tests are in tests_5x/, run by `tox -e grpc5`)."""

from __future__ import annotations

import queue
import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from grpc_requests import access_point, message, metadata, receive, resource
from rocketmq_proxy_grpc import routes
from rocketmq_proxy_grpc.service import peer_host
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb

from rocketmq_core.cli import main
from rocketmq_core.client.pull_consumer import PullConsumer


def read_back(cluster, topic: str, expected: int) -> list:
    """Every message of ``topic``, pulled with rocketmq-py's SDK over remoting."""

    async def pull_all():
        found = []
        async with PullConsumer("CID-proxy-check", cluster.namesrv_address) as consumer:
            for mq in await consumer.queues(topic):
                result = await consumer.pull(mq, 0, max_nums=64)
                found.extend(result.messages)
        return found

    deadline = time.monotonic() + 10
    while True:
        found = cluster.call(pull_all)
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_query_route_points_clients_at_the_proxy(cluster, proxy, stub):
    cluster.create_topic("GrpcRoute", queues=4)
    answer = stub.QueryRoute(
        spb.QueryRouteRequest(topic=resource("GrpcRoute"), endpoints=access_point(proxy)),
        metadata=metadata(),
    )
    assert answer.status.code == pb.OK
    assert [queue.id for queue in answer.message_queues] == [0, 1, 2, 3]
    for mq in answer.message_queues:
        assert mq.permission == pb.READ_WRITE
        assert mq.broker.name == "broker-a" and mq.broker.id == 0
        assert [(a.host, a.port) for a in mq.broker.endpoints.addresses] == [("127.0.0.1", proxy)]
        assert set(mq.accept_message_types) >= {pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION}


def test_unknown_topic_and_missing_client_id(stub, proxy):
    answer = stub.QueryRoute(
        spb.QueryRouteRequest(topic=resource("NoSuchGrpcTopic"), endpoints=access_point(proxy)),
        metadata=metadata(),
    )
    assert answer.status.code == pb.TOPIC_NOT_FOUND
    assert "NoSuchGrpcTopic" in answer.status.message
    answer = stub.QueryRoute(spb.QueryRouteRequest(topic=resource("GrpcRoute")))
    assert answer.status.code == pb.CLIENT_ID_REQUIRED


def producer_settings(topic: str, port: int) -> pb.Settings:
    return pb.Settings(
        client_type=pb.PRODUCER,
        access_point=access_point(port),
        request_timeout=Duration(seconds=3),
        publishing=pb.Publishing(
            topics=[resource(topic)], max_body_size=128 * 1024 * 1024, validate_message_type=True
        ),
        user_agent=pb.UA(language=pb.PYTHON, version="5.1.2"),
    )


def test_telemetry_settings_then_heartbeat(stub, proxy):
    client_id = "test-host@2@0@telemetry"
    heartbeat = spb.HeartbeatRequest(client_type=pb.PRODUCER)
    before = stub.Heartbeat(heartbeat, metadata=metadata(client_id))
    assert before.status.code == pb.UNRECOGNIZED_CLIENT_TYPE

    commands: queue.Queue = queue.Queue()
    commands.put(spb.TelemetryCommand(settings=producer_settings("GrpcRoute", proxy)))
    stream = stub.Telemetry(iter(commands.get, None), metadata=metadata(client_id))
    reply = next(stream)
    assert reply.status.code == pb.OK
    assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
    assert reply.settings.backoff_policy.max_attempts == 3
    assert [t.name for t in reply.settings.publishing.topics] == ["GrpcRoute"]

    after = stub.Heartbeat(heartbeat, metadata=metadata(client_id))
    assert after.status.code == pb.OK
    ended = stub.NotifyClientTermination(
        spb.NotifyClientTerminationRequest(), metadata=metadata(client_id)
    )
    assert ended.status.code == pb.OK
    assert stub.Heartbeat(heartbeat, metadata=metadata(client_id)).status.code != pb.OK
    commands.put(None)
    stream.cancel()


def test_settings_without_publishing_or_subscription_end_the_stream(stub):
    stream = stub.Telemetry(
        iter([spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER))]),
        metadata=metadata("test-host@3@0@bad-settings"),
    )
    with pytest.raises(grpc.RpcError) as raised:
        list(stream)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_send_normal_messages_read_back_over_remoting(cluster, stub):
    cluster.create_topic("GrpcSend", queues=4)
    sent = [message("GrpcSend", f"body-{i}".encode(), tag="TagA") for i in range(6)]
    for outgoing in sent:
        answer = stub.SendMessage(spb.SendMessageRequest(messages=[outgoing]), metadata=metadata())
        assert answer.status.code == pb.OK, answer.status.message
        (entry,) = answer.entries
        assert entry.message_id == outgoing.system_properties.message_id
        assert entry.offset >= 0
    stored = read_back(cluster, "GrpcSend", 6)
    assert sorted(m.body for m in stored) == sorted(m.body for m in sent)
    assert {m.msg_id for m in stored} == {m.system_properties.message_id for m in sent}
    assert {m.tags for m in stored} == {"TagA"}
    assert len({m.queue.queue_id for m in stored}) > 1  # spread over the queues


def test_fifo_group_goes_to_one_queue_in_order(cluster, stub):
    cluster.create_topic("GrpcFifo", queues=4)
    for i in range(5):
        outgoing = message("GrpcFifo", f"step-{i}".encode(), group="order-42")
        answer = stub.SendMessage(spb.SendMessageRequest(messages=[outgoing]), metadata=metadata())
        assert answer.status.code == pb.OK, answer.status.message
    stored = read_back(cluster, "GrpcFifo", 5)
    assert {m.queue.queue_id for m in stored} == {
        routes.queue_for_group(
            [routes.WriteQueue("broker-a", i) for i in range(4)], "order-42"
        ).queue_id
    }
    assert [m.body for m in sorted(stored, key=lambda m: m.queue_offset)] == [
        f"step-{i}".encode() for i in range(5)
    ]
    assert {m.properties["__SHARDINGKEY"] for m in stored} == {"order-42"}


def test_send_refusals(stub):
    empty = stub.SendMessage(spb.SendMessageRequest(), metadata=metadata())
    assert empty.status.code == pb.MESSAGE_CORRUPTED
    no_id = message("GrpcSend", b"x")
    no_id.system_properties.message_id = ""
    answer = stub.SendMessage(spb.SendMessageRequest(messages=[no_id]), metadata=metadata())
    assert answer.status.code == pb.ILLEGAL_MESSAGE_ID
    reserved = message("GrpcSend", b"x")
    reserved.user_properties["UNIQ_KEY"] = "mine"
    answer = stub.SendMessage(spb.SendMessageRequest(messages=[reserved]), metadata=metadata())
    assert answer.status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert "UNIQ_KEY" in answer.status.message
    for internal in ("TRAN_PREPARED_QUEUE_OFFSET", "TRAN_GIVEN_UP_HALF_OFFSET"):
        posing = message("GrpcSend", b"x")
        posing.user_properties[internal] = "0"
        answer = stub.SendMessage(spb.SendMessageRequest(messages=[posing]), metadata=metadata())
        assert answer.status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY, internal
    late = message("GrpcSend", b"x")
    late.user_properties["TRAN_DECIDED_LATE"] = "commit"
    answer = stub.SendMessage(spb.SendMessageRequest(messages=[late]), metadata=metadata())
    assert answer.status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    too_patient = message("GrpcSend", b"x")
    too_patient.system_properties.message_type = pb.TRANSACTION
    too_patient.system_properties.orphaned_transaction_recovery_duration.seconds = 3601
    answer = stub.SendMessage(spb.SendMessageRequest(messages=[too_patient]), metadata=metadata())
    assert answer.status.code == pb.BAD_REQUEST
    assert "3601 s" in answer.status.message and "3600 s" in answer.status.message


def test_receive_ack_and_change_invisible_duration(cluster, stub, proxy):
    cluster.create_topic("GrpcPop", queues=2)
    for i in range(3):
        stub.SendMessage(
            spb.SendMessageRequest(messages=[message("GrpcPop", f"pop-{i}".encode())]),
            metadata=metadata(),
        )
    responses = receive(stub, "GrpcPop", "GID-grpc-pop", proxy)
    assert responses[0].status.code == pb.OK, responses[0].status.message
    received = [r.message for r in responses if r.WhichOneof("content") == "message"]
    assert sorted(m.body for m in received) == [b"pop-0", b"pop-1", b"pop-2"]
    assert responses[-1].WhichOneof("content") == "delivery_timestamp"
    for m in received:
        assert m.system_properties.receipt_handle
        assert m.system_properties.body_encoding == pb.IDENTITY
        assert m.system_properties.delivery_attempt == 1

    first, *rest = received
    changed = stub.ChangeInvisibleDuration(
        spb.ChangeInvisibleDurationRequest(
            group=resource("GID-grpc-pop"),
            topic=resource("GrpcPop"),
            receipt_handle=first.system_properties.receipt_handle,
            invisible_duration=Duration(seconds=40),
            message_id=first.system_properties.message_id,
        ),
        metadata=metadata(),
    )
    assert changed.status.code == pb.OK, changed.status.message
    assert changed.receipt_handle != first.system_properties.receipt_handle
    handles = [changed.receipt_handle] + [m.system_properties.receipt_handle for m in rest]
    acked = stub.AckMessage(
        spb.AckMessageRequest(
            group=resource("GID-grpc-pop"),
            topic=resource("GrpcPop"),
            entries=[spb.AckMessageEntry(message_id="x", receipt_handle=h) for h in handles],
        ),
        metadata=metadata(),
    )
    assert acked.status.code == pb.OK, acked.status.message
    again = receive(stub, "GrpcPop", "GID-grpc-pop", proxy)
    assert [r.status.code for r in again] == [pb.MESSAGE_NOT_FOUND]


def test_receive_refusals(stub, proxy):
    short = receive(stub, "GrpcPop", "GID-grpc-pop", proxy, invisible_s=1)
    assert [r.status.code for r in short] == [pb.ILLEGAL_INVISIBLE_TIME]
    bad = stub.AckMessage(
        spb.AckMessageRequest(
            group=resource("GID-grpc-pop"),
            topic=resource("GrpcPop"),
            entries=[spb.AckMessageEntry(message_id="x", receipt_handle="not a handle")],
        ),
        metadata=metadata(),
    )
    assert bad.status.code == pb.INVALID_RECEIPT_HANDLE


def test_consistent_bucket_moves_few_keys():
    """Growing from n to n + 1 buckets, a key stays or moves to the new bucket."""
    for key in range(-500, 500):
        for buckets in range(1, 12):
            before = routes.consistent_bucket(key, buckets)
            after = routes.consistent_bucket(key, buckets + 1)
            assert 0 <= before < buckets
            assert after in (before, buckets)


def test_proxy_command_refuses_a_bad_port(capsys):
    assert main(["proxy", "-n", "127.0.0.1:9876", "--grpc-port", "70000"]) == 2
    assert "--grpc-port 70000 is not a port" in capsys.readouterr().err


def test_grpc_peer_strings_become_host_and_port():
    """What a send's born host is made of: grpcio percent-encodes an IPv6 peer's brackets."""
    assert peer_host("ipv4:10.1.2.3:5555") == "10.1.2.3:5555"
    assert peer_host("ipv6:%5B::1%5D:5555") == "[::1]:5555"
    assert peer_host("unix:/tmp/socket") == "unix:/tmp/socket"
