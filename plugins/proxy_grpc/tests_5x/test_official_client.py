"""The official 5.x Python client (PyPI rocketmq-python-client 5.1.2) against
`rocketmq standalone` serving gRPC in local mode. Run by `tox -e grpc5`: its package
``rocketmq`` clashes with the C++ client's, and its generated protobuf modules with the
proxy's, so the server runs in a process of its own."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
import trustme
from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    PushConsumer,
    SimpleConsumer,
    Transaction,
    TransactionChecker,
)
from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.consumer.push import MessageListener

from rocketmq_core.cli import main
from rocketmq_core.client.admin import Admin
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.client.pull_consumer import PullConsumer
from tests.processes import listen_port_with_free_neighbours


def standalone_ports() -> tuple[int, int, int]:
    """(listenPort, name server port, gRPC port), apart and outside the ephemeral range:
    a port bind(0) gave could be any outgoing connection's before the process binds it
    (the standalone's own, to its name server, took a picked haListenPort once). The
    VIP port (listenPort - 2) and the HA port (+ 1) are free too, and stay the defaults."""
    while True:
        listen, namesrv, grpc_port = (listen_port_with_free_neighbours() for _ in range(3))
        brokers = {listen - 2, listen, listen + 1}
        if namesrv != grpc_port and not {namesrv, grpc_port} & brokers:
            return listen, namesrv, grpc_port


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"rocketmq standalone exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def wait_until_ready(
    log: Path, process: subprocess.Popen, since: int = 0, timeout: float = 60
) -> None:
    """Until the log says "ready" past byte ``since`` (this start's lines): the broker is
    registered with its name server then (an open port says less: the name server
    listens before the broker has registered)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"rocketmq standalone exited with {process.returncode}")
        if b"rocketmq standalone ready" in log.read_bytes()[since:]:
            return
        time.sleep(0.1)
    raise TimeoutError(f"rocketmq standalone not ready after {timeout} s: see {log}")


class Standalone:
    """`rocketmq standalone` as a process, on free ports, its data under ``home``."""

    def __init__(self, home: Path, *settings: str) -> None:
        self.home = home
        listen_port, self.namesrv_port, self.grpc_port = standalone_ports()
        self.config = home / "broker.conf"
        self.config.write_text(
            "\n".join(
                [
                    f"listenPort={listen_port}",
                    f"grpcServerPort={self.grpc_port}",
                    f"storePathRootDir={home / 'store'}",
                    "brokerIP1=127.0.0.1",
                    # an undecided transaction is checked back within a second or two
                    "transactionTimeOut=1000",
                    "transactionCheckInterval=1000",
                    *settings,
                ]
            )
            + "\n"
        )
        self.process: subprocess.Popen | None = None

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self) -> None:
        log_path = self.home / "standalone.log"
        since = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "rocketmq_core.cli", "standalone"),
                    *("-c", str(self.config), "--namesrv-listen", self.namesrv),
                ],
                env={**os.environ, "HOME": str(self.home)},
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_until_ready(log_path, self.process, since)
        wait_for_port(self.grpc_port, self.process)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            assert self.process.wait(timeout=20) == 0
            self.process = None


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """One standalone for the module: (name server address, gRPC port)."""
    server = Standalone(tmp_path_factory.mktemp("home"))
    server.start()
    try:
        yield server.namesrv, server.grpc_port
    finally:
        server.stop()


def configuration(grpc_port: int) -> ClientConfiguration:
    return ClientConfiguration(f"127.0.0.1:{grpc_port}", Credentials("", ""))


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(namesrv: str, prefix: str) -> str:
    """A new topic of 4 queues (5.x clients need it to exist: the proxy creates none)."""
    topic = fresh(prefix)
    assert main(["topic", "create", "-t", topic, "-c", "DefaultCluster", "-n", namesrv]) == 0
    return topic


def read_back(namesrv: str, topic: str, expected: int) -> list:
    """The messages of ``topic`` as rocketmq-py's SDK pulls them over remoting."""

    async def pull_all():
        found = []
        async with PullConsumer("CID-grpc5-check", namesrv) as consumer:
            for queue in await consumer.queues(topic):
                found.extend((await consumer.pull(queue, 0, max_nums=64)).messages)
        return found

    deadline = time.monotonic() + 15
    while True:
        found = anyio.run(pull_all)
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def new_message(topic: str, body: bytes, **fields) -> Message:
    message = Message()
    message.topic = topic
    message.body = body
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def test_producer_sends_normal_fifo_and_timer_messages(standalone):
    namesrv, grpc_port = standalone
    topic = create_topic(namesrv, "T5")
    producer = Producer(configuration(grpc_port), (topic,))
    producer.startup()
    try:
        normal = producer.send(new_message(topic, b"normal", tag="TagA", keys="key-1"))
        fifo = [
            producer.send(new_message(topic, f"fifo-{i}".encode(), message_group="order-7"))
            for i in range(4)
        ]
        # 5.1.2 puts delivery_timestamp into Timestamp.seconds as it is: give seconds
        timer = producer.send(new_message(topic, b"timer", delivery_timestamp=int(time.time()) + 2))
    finally:
        producer.shutdown()
    stored = {m.msg_id: m for m in read_back(namesrv, topic, 6)}
    assert stored[normal.message_id].body == b"normal"
    assert stored[normal.message_id].tags == "TagA"
    assert stored[normal.message_id].keys == ["key-1"]
    in_group = [stored[receipt.message_id] for receipt in fifo]
    assert len({m.queue.queue_id for m in in_group}) == 1
    assert [m.body for m in sorted(in_group, key=lambda m: m.queue_offset)] == [
        f"fifo-{i}".encode() for i in range(4)
    ]
    assert stored[timer.message_id].body == b"timer"


def test_simple_consumer_receives_acks_and_changes_invisible_duration(standalone):
    namesrv, grpc_port = standalone
    topic, group = create_topic(namesrv, "T5pop"), fresh("GID5")
    producer = Producer(configuration(grpc_port), (topic,))
    producer.startup()
    consumer = SimpleConsumer(
        configuration(grpc_port), group, {topic: FilterExpression()}, await_duration=5
    )
    consumer.startup()
    try:
        sent = {producer.send(new_message(topic, f"m-{i}".encode())).message_id for i in range(3)}
        received = []
        deadline = time.monotonic() + 30
        while len(received) < 3 and time.monotonic() < deadline:
            received.extend(consumer.receive(16, 15))
        assert {m.message_id for m in received} == sent
        assert sorted(m.body for m in received) == [b"m-0", b"m-1", b"m-2"]
        consumer.change_invisible_duration(received[0], 20)
        for message in received:
            consumer.ack(message)
        assert consumer.receive(16, 15) == []
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_tls_clients_on_a_permissive_port(tmp_path, monkeypatch):
    """tls_enable=True, as the Java 5.x client's default enableSsl: the broker's
    tls.server.mode covers its gRPC port, plain clients still welcome."""
    authority = trustme.CA()
    server = authority.issue_cert("127.0.0.1", "localhost")
    cert, key, ca = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    server.cert_chain_pems[0].write_to_path(str(cert))
    server.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(ca))
    # the 5.x client verifies with gRPC's default roots: this test's CA
    monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(ca))
    home = tmp_path / "home"
    home.mkdir()
    server_process = Standalone(
        home,
        "tls.server.mode=permissive",
        f"tls.server.certPath={cert}",
        f"tls.server.keyPath={key}",
    )
    server_process.start()
    try:
        namesrv, grpc_port = server_process.namesrv, server_process.grpc_port
        topic, group = create_topic(namesrv, "T5tls"), fresh("GID5tls")
        producer = Producer(configuration(grpc_port), (topic,), tls_enable=True)
        producer.startup()
        consumer = SimpleConsumer(
            configuration(grpc_port),
            group,
            {topic: FilterExpression()},
            await_duration=5,
            tls_enable=True,
        )
        consumer.startup()
        try:
            sent = producer.send(new_message(topic, b"over TLS")).message_id
            received = []
            deadline = time.monotonic() + 30
            while not received and time.monotonic() < deadline:
                received.extend(consumer.receive(16, 15))
            assert [(m.message_id, m.body) for m in received] == [(sent, b"over TLS")]
            consumer.ack(received[0])
        finally:
            consumer.shutdown()
            producer.shutdown()
        plain = Producer(configuration(grpc_port), (topic,))
        plain.startup()
        try:
            assert plain.send(new_message(topic, b"plain")).message_id
        finally:
            plain.shutdown()
        assert sorted(m.body for m in read_back(namesrv, topic, 2)) == [b"over TLS", b"plain"]
    finally:
        server_process.stop()


def test_tag_filter(standalone):
    namesrv, grpc_port = standalone
    topic, group = create_topic(namesrv, "T5tag"), fresh("GID5tag")
    producer = Producer(configuration(grpc_port), (topic,))
    producer.startup()
    consumer = SimpleConsumer(
        configuration(grpc_port), group, {topic: FilterExpression("TagB")}, await_duration=5
    )
    consumer.startup()
    try:
        producer.send(new_message(topic, b"a", tag="TagA"))
        wanted = producer.send(new_message(topic, b"b", tag="TagB")).message_id
        received = []
        deadline = time.monotonic() + 20
        while not received and time.monotonic() < deadline:
            received.extend(consumer.receive(16, 15))
        assert [m.message_id for m in received] == [wanted]
        assert received[0].tag == "TagB"
        for message in received:
            consumer.ack(message)
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_admin_tools_list_the_official_simple_consumer(standalone):
    """Local mode keeps a 5.x consumer in the broker's table, as Apache's proxy does:
    admin tools list it with its subscription until it shuts down."""
    namesrv, grpc_port = standalone
    topic, group = create_topic(namesrv, "T5admin"), fresh("GID5admin")

    async def connections():
        async with Admin(namesrv) as admin:
            return await admin.group_connections(group)

    async def running_info(client_id: str):
        async with Admin(namesrv) as admin:
            return await admin.consumer_running_info(group, client_id)

    consumer = SimpleConsumer(
        configuration(grpc_port), group, {topic: FilterExpression("TagB")}, await_duration=5
    )
    consumer.startup()
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                listed = anyio.run(connections)
                break
            except AdminError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        (connection,) = listed.connections
        assert connection.language == "PYTHON"
        assert (listed.consume_type, listed.subscriptions) == ("CONSUME_ACTIVELY", {topic: "TagB"})
        info = anyio.run(running_info, connection.client_id)
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
    finally:
        consumer.shutdown()
    with pytest.raises(AdminError, match="no online consumer"):
        anyio.run(connections)


class CommitAll(TransactionChecker):
    def check(self, message):
        return TransactionResolution.COMMIT


def test_transaction_commit_and_rollback(standalone):
    namesrv, grpc_port = standalone
    topic = create_topic(namesrv, "T5tx")
    producer = Producer(configuration(grpc_port), (topic,), checker=CommitAll())
    producer.startup()
    try:
        committed: Transaction = producer.begin_transaction()
        kept = producer.send(new_message(topic, b"kept"), committed)
        committed.commit()
        dropped: Transaction = producer.begin_transaction()
        producer.send(new_message(topic, b"dropped"), dropped)
        dropped.rollback()
    finally:
        producer.shutdown()
    stored = read_back(namesrv, topic, 1)
    assert [m.body for m in stored] == [b"kept"]
    assert stored[0].msg_id == kept.message_id


def test_orphaned_transaction_is_checked_back_through_telemetry(standalone):
    """Neither committed nor rolled back: the broker asks, the proxy relays the question on
    the producer's Telemetry stream, the client's checker commits."""
    namesrv, grpc_port = standalone
    topic = create_topic(namesrv, "T5check")
    producer = Producer(configuration(grpc_port), (topic,), checker=CommitAll())
    producer.startup()
    try:
        undecided: Transaction = producer.begin_transaction()
        receipt = producer.send(new_message(topic, b"checked"), undecided)
        stored = read_back(namesrv, topic, 1)
    finally:
        producer.shutdown()
    assert [(m.body, m.msg_id) for m in stored] == [(b"checked", receipt.message_id)]


def test_unacked_message_comes_back(standalone):
    namesrv, grpc_port = standalone
    topic, group = create_topic(namesrv, "T5again"), fresh("GID5again")
    producer = Producer(configuration(grpc_port), (topic,))
    producer.startup()
    consumer = SimpleConsumer(
        configuration(grpc_port), group, {topic: FilterExpression()}, await_duration=5
    )
    consumer.startup()
    try:
        sent = producer.send(new_message(topic, b"again")).message_id
        first = []
        deadline = time.monotonic() + 20
        while not first and time.monotonic() < deadline:
            first = consumer.receive(1, 15)
        assert [m.message_id for m in first] == [sent]
        assert first[0].delivery_attempt == 1
        consumer.change_invisible_duration(first[0], 1)  # visible again in a second
        second = []
        deadline = time.monotonic() + 30
        while not second and time.monotonic() < deadline:
            second = consumer.receive(1, 15)
        assert [m.message_id for m in second] == [sent]
        assert second[0].delivery_attempt == 2
        consumer.ack(second[0])
    finally:
        consumer.shutdown()
        producer.shutdown()


class Collect(MessageListener):
    """Takes its time over each message: consumed concurrently, a group would interleave."""

    def __init__(self) -> None:
        self.received: list[tuple[str | None, bytes]] = []

    def consume(self, message) -> ConsumeResult:
        time.sleep(random.uniform(0, 0.03))
        self.received.append((message.message_group, message.body))
        return ConsumeResult.SUCCESS


def push_consume(grpc_port: int, topic: str, group: str, expected: int) -> list:
    listener = Collect()
    consumer = PushConsumer(configuration(grpc_port), group, listener, {topic: FilterExpression()})
    consumer.startup()
    try:
        deadline = time.monotonic() + 40
        while len(listener.received) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        consumer.shutdown()
    return listener.received


def test_push_consumer(standalone):
    namesrv, grpc_port = standalone
    topic = create_topic(namesrv, "T5push")
    producer = Producer(configuration(grpc_port), (topic,))
    producer.startup()
    try:
        for i in range(5):
            producer.send(new_message(topic, f"push-{i}".encode()))
    finally:
        producer.shutdown()
    received = push_consume(grpc_port, topic, fresh("GID5push"), 5)
    assert sorted(body for _, body in received) == [f"push-{i}".encode() for i in range(5)]


def test_fifo_push_consumer_keeps_each_group_in_order(standalone):
    """The group is orderly (consumeMessageOrderly): the proxy says fifo in the settings
    it answers and pops in order."""
    namesrv, grpc_port = standalone
    topic, group = create_topic(namesrv, "T5fifo"), fresh("GID5fifo")
    orderly = ["group", "update", "-g", group, "-c", "DefaultCluster", "--orderly", "true"]
    assert main([*orderly, "-n", namesrv]) == 0
    producer = Producer(configuration(grpc_port), (topic,))
    producer.startup()
    try:
        for i in range(6):
            for message_group in ("a", "b"):
                body = f"{message_group}-{i}".encode()
                producer.send(new_message(topic, body, message_group=message_group))
    finally:
        producer.shutdown()
    received = push_consume(grpc_port, topic, group, 12)
    for message_group in ("a", "b"):
        assert [body for g, body in received if g == message_group] == [
            f"{message_group}-{i}".encode() for i in range(6)
        ]


def once_reconnected(call, *args):
    """``call(*args)``, retried while the client's channel is still backing off from the
    refused connections of the restart (as an application would retry)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return call(*args)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_broker_restart_in_the_middle(tmp_path):
    """Clients keep their gRPC channels across a restart of the broker and its proxy: what
    was sent before is still there, unacknowledged messages come again, sends go on."""
    server = Standalone(tmp_path)
    server.start()
    producer = consumer = None
    try:
        topic, group = create_topic(server.namesrv, "T5restart"), fresh("GID5restart")
        producer = Producer(configuration(server.grpc_port), (topic,))
        producer.startup()
        consumer = SimpleConsumer(
            configuration(server.grpc_port), group, {topic: FilterExpression()}, await_duration=5
        )
        consumer.startup()
        before = [producer.send(new_message(topic, f"before-{i}".encode())) for i in range(4)]
        first = []
        deadline = time.monotonic() + 20
        while len(first) < 4 and time.monotonic() < deadline:
            first.extend(consumer.receive(2, 10))  # two are acked, the others not
        for message in first[:2]:
            consumer.ack(message)

        server.stop()
        server.start()

        after = once_reconnected(producer.send, new_message(topic, b"after"))
        expected = {r.message_id for r in before[2:]} | {after.message_id}
        expected -= {m.message_id for m in first[:2]}
        expected |= {r.message_id for r in before} - {m.message_id for m in first}
        again = []
        deadline = time.monotonic() + 40
        while {m.message_id for m in again} < expected and time.monotonic() < deadline:
            for message in once_reconnected(consumer.receive, 16, 10):
                again.append(message)
                consumer.ack(message)
        assert {m.message_id for m in again} >= expected
        assert not {m.message_id for m in first[:2]} & {m.message_id for m in again}
    finally:
        if consumer is not None:
            consumer.shutdown()
        if producer is not None:
            producer.shutdown()
        server.stop()


ACL_RULES = """\
accounts:
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Signed=PUB]
  - accessKey: proxy-key
    secretKey: proxy-secret
    admin: true
"""


def test_signed_requests_with_acl_on(tmp_path, caplog):
    """The 5.x client's own signature is what the proxy checks, against plain_acl.yml."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(ACL_RULES)
    server = Standalone(
        tmp_path,
        "aclEnable=true",
        'innerClientAuthenticationCredentials={"accessKey":"proxy-key","secretKey":"proxy-secret"}',
    )
    server.start()
    try:
        admin = ("--access-key", "proxy-key", "--secret-key", "proxy-secret")
        create = ("topic", "create", "-t", "Signed", "-c", "DefaultCluster")
        assert main([*create, "-n", server.namesrv, *admin]) == 0
        access_point = f"127.0.0.1:{server.grpc_port}"
        signed = ClientConfiguration(access_point, Credentials("producer-key", "producer-secret"))
        producer = Producer(signed, ("Signed",))
        producer.startup()
        try:
            assert producer.send(new_message("Signed", b"signed")).message_id
        finally:
            producer.shutdown()
        forged = ClientConfiguration(access_point, Credentials("producer-key", "wrong-secret"))
        producer = Producer(forged, ("Signed",))
        producer.startup()
        try:
            with pytest.raises(Exception, match="failed to fetch topic:Signed route"):
                producer.send(new_message("Signed", b"forged"))
        finally:
            producer.shutdown()
        # the client logs why its route query failed
        assert "40100, signature check failed for access key producer-key" in caplog.text
        stored = read_back_signed(server.namesrv, "Signed")
        assert [m.body for m in stored] == [b"signed"]
    finally:
        server.stop()


def read_back_signed(namesrv: str, topic: str) -> list:
    from rocketmq_core.acl.signing import Credentials as RemotingCredentials
    from rocketmq_core.client.config import ClientConfig

    async def pull_all():
        config = ClientConfig(
            namesrv_addr=namesrv, credentials=RemotingCredentials("proxy-key", "proxy-secret")
        )
        found = []
        async with PullConsumer("CID-grpc5-acl", config=config) as consumer:
            for queue in await consumer.queues(topic):
                found.extend((await consumer.pull(queue, 0, max_nums=64)).messages)
        return found

    return anyio.run(pull_all)
