"""Local mode: a broker with grpcServerPort starts the proxy beside it."""

from __future__ import annotations

import logging
import queue
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from grpc_requests import access_point, message, metadata, receive, resource
from rocketmq_proxy_grpc import local_clients
from rocketmq_proxy_grpc.clients import Client
from rocketmq_proxy_grpc.renewals import Renewals
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.errors import RocketMQError
from rocketmq_core.protocol.bodies import CMResult
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.remoting.connection import Connection
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


def consumer_settings(group: str, topic: str, port: int) -> pb.Settings:
    return pb.Settings(
        client_type=pb.SIMPLE_CONSUMER,
        access_point=access_point(port),
        request_timeout=Duration(seconds=3),
        subscription=pb.Subscription(
            group=resource(group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=resource(topic),
                    expression=pb.FilterExpression(type=pb.TAG, expression="TagA||TagB"),
                )
            ],
        ),
        user_agent=pb.UA(language=pb.PYTHON, version="5.1.2"),
    )


def test_a_5x_consumer_is_in_the_brokers_table_and_answers_what_an_admin_asks(
    tmp_path, monkeypatch
):
    """As Apache's proxy in local mode: admin tools list a 5.x consumer, and a running
    info with jstack or a consume-directly reaches it on its Telemetry stream as
    PrintThreadStackTraceCommand and VerifyMessageCommand; their replies come back, an
    unanswered one as SYSTEM_BUSY; NotifyClientTermination takes it off the table."""
    group, topic, client_id = "GID-local-admin", "LocalAdmin", "test-host@7@0@admin"
    with (
        EmbeddedCluster(tmp_path, grpc_server_port=0) as cluster,
        ThreadPoolExecutor(1) as admin_calls,
    ):
        cluster.create_topic(topic)
        port = cluster.broker.services["grpc_proxy"].port

        def ask(method: str, *args, **kwargs):
            async def call():
                async with Admin(cluster.namesrv_address) as admin:
                    return await getattr(admin, method)(*args, **kwargs)

            return admin_calls.submit(cluster.call, call)

        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            sent = stub.SendMessage(
                spb.SendMessageRequest(messages=[message(topic, b"verify me", tag="TagA")]),
                metadata=metadata(client_id),
                timeout=10,
            )
            assert sent.status.code == pb.OK
            commands: queue.Queue = queue.Queue()
            commands.put(spb.TelemetryCommand(settings=consumer_settings(group, topic, port)))
            stream = stub.Telemetry(
                iter(commands.get, None), metadata=metadata(client_id), timeout=60
            )
            try:
                assert next(stream).status.code == pb.OK  # the settings, answered

                listed = ask("group_connections", group).result(10)
                assert [(c.client_id, c.language) for c in listed.connections] == [
                    (client_id, "PYTHON")
                ]
                assert (listed.consume_type, listed.subscriptions) == (
                    "CONSUME_ACTIVELY",
                    {topic: "TagA||TagB"},
                )

                running = ask("consumer_running_info", group, client_id, jstack=True)
                asked = next(stream).print_thread_stack_trace_command
                commands.put(
                    spb.TelemetryCommand(
                        status=pb.Status(code=pb.OK),
                        thread_stack_trace=spb.ThreadStackTrace(
                            nonce=asked.nonce, thread_stack_trace='"main" RUNNABLE'
                        ),
                    )
                )
                info = running.result(10)
                assert info.jstack == '"main" RUNNABLE'
                # what Java's mqadmin consumerStatus reads of every answer
                assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
                assert info.properties["PROP_CLIENT_VERSION"] == "5.1.2"
                assert [s.topic for s in info.subscription_set] == [topic]
                plain = ask("consumer_running_info", group, client_id).result(10)
                assert (plain.jstack, plain.properties["PROP_CONSUMEORDERLY"]) == (None, "false")

                verified = ask(
                    "consume_message_directly", group, client_id, sent.entries[0].message_id, topic
                )
                verify = next(stream).verify_message_command
                assert (verify.message.body, verify.message.system_properties.tag) == (
                    b"verify me",
                    "TagA",
                )
                commands.put(
                    spb.TelemetryCommand(
                        status=pb.Status(code=pb.FAILED_TO_CONSUME_MESSAGE),
                        verify_message_result=spb.VerifyMessageResult(nonce=verify.nonce),
                    )
                )
                result = verified.result(10)
                assert (result.consume_result, result.remark) == (
                    CMResult.CR_LATER,
                    "from gRPC client",
                )

                monkeypatch.setattr(local_clients, "RELAY_TIMEOUT", 0.5)
                unanswered = ask("consumer_running_info", group, client_id, jstack=True)
                assert next(stream).HasField("print_thread_stack_trace_command")
                with pytest.raises(RocketMQError, match="call remote timeout"):
                    unanswered.result(10)

                # settings of another group: the client moves there
                moved = consumer_settings(f"{group}-2", topic, port)
                commands.put(spb.TelemetryCommand(settings=moved))
                assert next(stream).settings.subscription.group.name == f"{group}-2"
                listed = ask("group_connections", f"{group}-2").result(10)
                assert [c.client_id for c in listed.connections] == [client_id]
                with pytest.raises(AdminError, match="no online consumer"):
                    ask("group_connections", group).result(10)

                ended = stub.NotifyClientTermination(
                    spb.NotifyClientTerminationRequest(group=resource(f"{group}-2")),
                    metadata=metadata(client_id),
                    timeout=10,
                )
                assert ended.status.code == pb.OK
                with pytest.raises(AdminError, match="no online consumer"):
                    ask("group_connections", f"{group}-2").result(10)
            finally:
                commands.put(None)
                stream.cancel()


def test_a_push_consumer_with_a_sql_filter_is_registered_as_apaches_proxy_does():
    settings = consumer_settings("GID-sql", "LocalAdmin", 8081)
    settings.client_type = pb.PUSH_CONSUMER
    settings.subscription.subscriptions[0].expression.CopyFrom(
        pb.FilterExpression(type=pb.SQL, expression="a > 1 AND b = 'x'")
    )
    data = local_clients.consumer_data(Client("test-host@8@0@sql", settings))
    assert data is not None
    assert (data.group_name, data.consume_type.name, data.message_model.name) == (
        "GID-sql",
        "CONSUME_PASSIVELY",
        "CLUSTERING",
    )
    (subscription,) = data.subscriptions
    assert (subscription.topic, subscription.sub_string, subscription.expression_type) == (
        "LocalAdmin",
        "a > 1 AND b = 'x'",
        "SQL92",
    )
    assert subscription.tags_set == []


@pytest.mark.parametrize(
    ("backend", "flush", "in_process"),
    [
        ("asyncio", "ASYNC_FLUSH", True),
        ("asyncio", "SYNC_FLUSH", True),
        ("trio", "ASYNC_FLUSH", False),
    ],
)
def test_a_send_goes_to_the_brokers_own_send_processor_without_a_socket(
    tmp_path, backend, flush, in_process
):
    """On the broker's own loop the proxy hands a send to the broker's send processor
    (remoting.local_call): no remoting request over loopback, the gRPC client is the
    sender the processor sees, and a SYNC_FLUSH send is answered once flushed (a later
    answer); a refusal answers as over remoting. Beside a broker on trio the proxy's
    thread sends over remoting as before."""
    topic = "LocalSends"
    with EmbeddedCluster(
        tmp_path,
        backend=backend,
        grpc_server_port=0,
        flush_disk_type=flush,
        reject_transaction_message=True,
    ) as cluster:
        cluster.create_topic(topic)
        port = cluster.broker.services["grpc_proxy"].port
        route = cluster.broker.server.processors.lookup(RequestCode.SEND_MESSAGE_V2)
        processor, seen = route.processor, []

        def spy(ctx, request):
            seen.append((isinstance(ctx.connection, Connection), ctx.peer_address, []))
            answer = processor(ctx, request)  # raises for the refused one
            seen[-1][2].append(type(answer).__name__)
            return answer

        route.processor = spy
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            sent = stub.SendMessage(
                spb.SendMessageRequest(
                    messages=[message(topic, b"local %d" % n) for n in range(3)]
                ),
                metadata=metadata(),
                timeout=10,
            )
            half = message(topic, b"half")  # a broker with rejectTransactionMessage refuses
            half.system_properties.message_type = pb.TRANSACTION
            refused = stub.SendMessage(
                spb.SendMessageRequest(messages=[half]), metadata=metadata(), timeout=10
            )
        assert [entry.status.code for entry in sent.entries] == [pb.OK] * 3
        assert len({entry.message_id for entry in sent.entries}) == 3
        assert [entry.status.code for entry in refused.entries] == [pb.FORBIDDEN]
        if flush == "SYNC_FLUSH":
            stats = cluster.broker.store.stats()
            assert stats["flushed_offset"] >= cluster.broker.store.max_commit_log_offset > 0

        async def stored() -> int:
            async with Admin(cluster.namesrv_address) as admin:
                return (await admin.topic_stats(topic)).total_messages

        assert cluster.call(stored) == 3
    assert [over_a_connection for over_a_connection, _, _ in seen] == [not in_process] * 4
    if in_process:  # the gRPC client's address, not the proxy's own remoting client's
        assert all(peer.startswith("127.0.0.1:") for _, peer, _ in seen)
        # SYNC_FLUSH: answered by the flusher's callback, once durable
        later = "LaterAnswer" if flush == "SYNC_FLUSH" else "RemotingCommand"
        assert [kind for _, _, kind in seen] == [[later]] * 3 + [[]]


def test_a_local_send_answered_later_is_waited_for_as_long_as_over_remoting(tmp_path):
    """A send the broker answers later (a callback's) is waited for the proxy's request
    timeout, as a remoting request would be; the usual ones are answered at once, with
    no timeout of their own (answer_locally)."""
    topic = "LocalLater"
    with EmbeddedCluster(tmp_path, backend="asyncio", grpc_server_port=0) as cluster:
        cluster.create_topic(topic)
        port = cluster.broker.services["grpc_proxy"].port
        route = cluster.broker.server.processors.lookup(RequestCode.SEND_MESSAGE_V2)
        route.processor = lambda ctx, request: ctx.connection.answer_later(request)  # never
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            started = time.monotonic()
            answer = stub.SendMessage(
                spb.SendMessageRequest(messages=[message(topic, b"never answered")]),
                metadata=metadata(),
                timeout=30,
            )
            waited = time.monotonic() - started
    assert 2.5 <= waited < 20  # the proxy's requestTimeout (3 s), not the client's 30 s
    assert [entry.status.code for entry in answer.entries] == [pb.PROXY_TIMEOUT]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_ack_and_a_change_of_invisible_time_reach_the_broker_without_a_socket(tmp_path, backend):
    """On the broker's own loop the proxy hands ACK_MESSAGE and
    CHANGE_MESSAGE_INVISIBLETIME to the broker's processors too (grpc-receive: one ack a
    message); beside a broker on trio they go over remoting."""
    topic, group = "LocalAcks", "LocalAckGroup"
    with EmbeddedCluster(tmp_path, backend=backend, grpc_server_port=0) as cluster:
        cluster.create_topic(topic)
        port = cluster.broker.services["grpc_proxy"].port
        seen: list[tuple[int, bool]] = []
        for code in (RequestCode.ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME):
            route = cluster.broker.server.processors.lookup(code)

            def spy(ctx, request, processor=route.processor):
                seen.append((request.code, isinstance(ctx.connection, Connection)))
                return processor(ctx, request)

            route.processor = spy
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            sent = stub.SendMessage(
                spb.SendMessageRequest(messages=[message(topic, b"to ack")]),
                metadata=metadata(),
                timeout=10,
            )
            assert sent.status.code == pb.OK
            answers = receive(stub, topic, group, port)
            received = [answer.message for answer in answers if answer.HasField("message")]
            assert [m.body for m in received] == [b"to ack"]
            changed = stub.ChangeInvisibleDuration(
                spb.ChangeInvisibleDurationRequest(
                    group=resource(group),
                    topic=resource(topic),
                    receipt_handle=received[0].system_properties.receipt_handle,
                    invisible_duration=Duration(seconds=60),
                    message_id=received[0].system_properties.message_id,
                ),
                metadata=metadata(),
                timeout=10,
            )
            assert changed.status.code == pb.OK
            acked = stub.AckMessage(
                spb.AckMessageRequest(
                    group=resource(group),
                    topic=resource(topic),
                    entries=[
                        spb.AckMessageEntry(
                            message_id=received[0].system_properties.message_id,
                            receipt_handle=changed.receipt_handle,
                        )
                    ],
                ),
                metadata=metadata(),
                timeout=10,
            )
            assert acked.status.code == pb.OK
    over_a_connection = backend == "trio"
    assert seen == [
        (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, over_a_connection),
        (RequestCode.ACK_MESSAGE, over_a_connection),
    ]
