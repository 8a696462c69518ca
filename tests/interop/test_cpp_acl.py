"""The official C++ client (rocketmq==0.4.4) against a broker with aclEnable=true
(docs/spec/ACL.md): it signs every request with ``set_session_credentials``, or with an
empty AccessKey when it has none.

One cluster serves the module; its ``plain_acl.yml`` has the shape of Apache's sample
(a global white list that leaves loopback out, an admin account and a normal one with
topic and group perms). The C++ client's API does not carry a broker's remark: a
refused sync send raises "No route info of this topic", a refused pull comes back as
BROKER_TIMEOUT. The remark (the AclException text) is in the client's own log,
``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N``, which the refusal tests read.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import pwd
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rocketmq_core.acl.validator import AclDenied
from rocketmq_core.persist import atomic_write
from rocketmq_core.testing.cluster import EmbeddedCluster
from tests.cpp_client import load_cpp_client

from .cpp import CollectingConsumer, message, start_producer, wait_until

ADMIN = ("RocketMQ", "12345678")
NORMAL = ("rocketmq2", "12345678")
CHANNEL = "ALIYUN"  # the C++ client's default auth channel, signed as OnsChannel
JAVA_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
# Apache's sample, with the normal account's grants on this module's topics and groups
RULES = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: true

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclTopicA=DENY
      - AclTopicB=PUB|SUB
      - AclTopicC=SUB
    groupPerms:
      - GroupA=DENY
      - GroupB=PUB|SUB
      - GroupC=SUB

  - accessKey: loopback-host
    secretKey: loopback-secret
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
"""
TOPICS = ("AclTopicA", "AclTopicB", "AclTopicC", "AclTopicD", "AclTopicE", "AclTopicF")


@pytest.fixture(scope="module")
def client():
    return load_cpp_client()


@pytest.fixture(scope="module")
def send_failed(client) -> type[Exception]:
    """What the wheel raises when every attempt of a sync send failed."""
    return importlib.import_module("rocketmq.exceptions").ProducerSendSyncFailed


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("rocketmq-home")
    write_rules(home, RULES)
    return home


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, client, home):
    with EmbeddedCluster(
        tmp_path_factory.mktemp("cluster"),
        acl_enable=True,
        rocketmq_home=str(home),
        acl_file_watch_interval=100,
        message_delay_level="1s 1s 1s 1s",  # a message given back returns after 1 s
    ) as running:
        for topic in TOPICS:
            running.create_topic(topic)
        # routed before the consumer starts: the C++ client looks it up at start only
        running.create_topic("%RETRY%GroupB", 1)
        yield running


@pytest.fixture
def rules(cluster, home):
    """Lets a test rewrite the rules; the module's rules are back in force after it."""
    yield lambda text: write_rules(home, text)
    if (home / "conf" / "plain_acl.yml").read_text() != RULES:
        in_force = cluster.broker.acl.rules
        write_rules(home, RULES)
        assert wait_until(lambda: cluster.broker.acl.rules is not in_force, timeout=10)


def write_rules(home: Path, text: str) -> None:
    # whole or not at all: the broker polls the file while it is written
    atomic_write(home / "conf" / "plain_acl.yml", text.encode())


class CppLog:
    """What the C++ client logged from a mark on (its files for this process)."""

    def __init__(self) -> None:
        homes = {os.environ.get("HOME") or "", pwd.getpwuid(os.getuid()).pw_dir}
        self._directories = [Path(home) / "logs" / "rocketmq-cpp" for home in homes if home]
        self._start = self._sizes()

    def _files(self) -> list[Path]:
        pattern = f"{os.getpid()}_rocketmq-cpp.log.*"
        return [path for directory in self._directories for path in directory.glob(pattern)]

    def _sizes(self) -> dict[Path, int]:
        return {path: path.stat().st_size for path in self._files()}

    def text(self) -> str:
        parts = []
        for path in self._files():
            with path.open("rb") as file:
                file.seek(self._start.get(path, 0))
                parts.append(file.read().decode(errors="replace"))
        return "".join(parts)

    def shows(self, remark: str, timeout: float = 10.0) -> bool:
        return wait_until(lambda: remark in self.text(), timeout=timeout)


@pytest.fixture
def cpp_log() -> CppLog:
    return CppLog()


@contextmanager
def producer(
    client, cluster: EmbeddedCluster, group: str, credentials: tuple[str, str] | None
) -> Iterator[Any]:
    instance = client.Producer(group)
    instance.set_namesrv_addr(cluster.namesrv_address)
    if credentials is not None:
        instance.set_session_credentials(*credentials, CHANNEL)
    start_producer(instance)
    try:
        yield instance
    finally:
        instance.shutdown()


@contextmanager
def pull_consumer(client, cluster: EmbeddedCluster, group: str, credentials) -> Iterator[Any]:
    instance = client.PullConsumer(group)
    instance.set_namesrv_addr(cluster.namesrv_address)
    instance.set_session_credentials(*credentials, CHANNEL)
    instance.start()
    try:
        yield instance
    finally:
        instance.shutdown()


def pull_all(client, consumer, topic: str) -> tuple[list[bytes], set[str]]:
    """Every message of ``topic`` from offset 0, and the pull statuses seen.

    The wheel's ``pull`` asks again forever after a refusal (BROKER_TIMEOUT): this
    reads each queue until it has no new message or the pull failed."""
    dll, statuses = client.dll, client._CPullStatus
    queues = ctypes.POINTER(client._CMessageQueue)()
    count = ctypes.c_int()
    client.ffi_check(
        dll.FetchSubscriptionMessageQueues(
            consumer._handle, topic.encode(), ctypes.pointer(queues), ctypes.pointer(count)
        )
    )
    bodies: list[bytes] = []
    seen: set[str] = set()
    try:
        for index in range(count.value):
            offset = 0
            while True:
                result = dll.Pull(consumer._handle, ctypes.pointer(queues[index]), b"*", offset, 32)
                status = statuses(result.pullStatus)
                seen.add(status.name)
                if status == statuses.FOUND:
                    bodies.extend(
                        dll.GetMessageBody(result.msgFoundList[n]) for n in range(result.size)
                    )
                    offset = result.nextBeginOffset
                dll.ReleasePullResult(result)
                if status != statuses.FOUND:
                    break
    finally:
        client.ffi_check(dll.ReleaseSubscriptionMessageQueue(queues))
    return bodies, seen


def stored(cluster: EmbeddedCluster, topic: str) -> int:
    store = cluster.broker.store
    return sum(max(0, store.max_offset(topic, queue)) for queue in range(4))


def delivered(consumer: CollectingConsumer) -> set[tuple[bytes, int]]:
    """(body, reconsume times) of each delivery so far."""
    return {(item.body, item.reconsume_times) for item in list(consumer.received)}


def expected_bodies(count: int) -> list[bytes]:
    return sorted(f"body-{n}".encode() for n in range(count))


def refusal(text: str) -> str:
    """The remark our broker answers (and the client logs) for a refused request."""
    remark = AclDenied(text).remark
    assert remark.startswith(f"{JAVA_EXCEPTION}: {text}, ")  # Java's exception, then where
    return remark


# --- allowed ------------------------------------------------------------------------------


def test_a_producer_and_a_push_consumer_with_their_grants(client, cluster, cpp_log):
    runs = cluster.broker.server.processors.frame_server
    served_before = runs.served
    with producer(client, cluster, "PG-acl-normal", NORMAL) as sender:
        results = [sender.send_sync(message(client, "AclTopicB", n)) for n in range(10)]
        results.append(sender.send_batch([message(client, "AclTopicB", n) for n in range(10, 15)]))
    assert [r.status for r in results] == [client.SendStatus.OK] * 11
    # its signed headers are checked where they are read (send_frames): all but the first
    # (no verdict kept yet) and each queue's first put are answered so, the batch too; the
    # account's white list (192.168.1.*) does not take this peer: its signatures are checked
    queues = cluster.broker.topics.get("AclTopicB").write_queue_nums
    assert runs.served - served_before >= 11 - 1 - queues
    consumer = CollectingConsumer(
        client,
        cluster.namesrv_address,
        "GroupB",
        "AclTopicB",
        reconsume=lambda item: item.body == b"body-0" and item.reconsume_times == 0,
    )
    consumer.consumer.set_session_credentials(*NORMAL, CHANNEL)
    every_body = set(expected_bodies(15))

    def all_delivered_and_body_0_again() -> bool:
        seen = delivered(consumer)
        return {body for body, _ in seen} == every_body and (b"body-0", 1) in seen

    with consumer:
        # the message given back returns through %RETRY%GroupB (SUB on the group)
        assert wait_until(all_delivered_and_body_0_again, timeout=20)
    # heartbeats, pulls and, at shutdown, the offsets: every request signed as we check it
    assert sum(cluster.broker.offsets.offsets("GroupB", "AclTopicB").values()) == 15
    assert "Check signature failed" not in cpp_log.text()
    # a C++ producer unregisters with consumerGroup "": "%RETRY%" meets defaultGroupPerm
    # DENY, as on a Java broker; the client logs it and shuts down all the same
    assert cpp_log.shows(f"unregisterClient fail:{refusal('No default permission for group:')}")


def test_the_admin_account_sends_anywhere_and_a_pull_consumer_reads(client, cluster, cpp_log):
    # the admin account has no perms of its own: no topic or group is checked for it
    with producer(client, cluster, "PG-acl-admin", ADMIN) as sender:
        for topic in ("AclTopicA", "AclTopicC"):
            results = [sender.send_sync(message(client, topic, n)) for n in range(5)]
            assert [r.status for r in results] == [client.SendStatus.OK] * 5
    # the normal account has SUB on AclTopicC and on GroupC
    with pull_consumer(client, cluster, "GroupC", NORMAL) as puller:
        bodies, statuses = pull_all(client, puller, "AclTopicC")
    assert sorted(bodies) == expected_bodies(5)
    assert statuses == {"FOUND", "NO_NEW_MSG"}
    assert "AclException" not in cpp_log.text()


def test_an_account_white_list_lets_a_wrong_secret_through(client, cluster, cpp_log):
    # loopback-host's whiteRemoteAddress is this peer: no signature check, no perms
    with producer(client, cluster, "PG-acl-white", ("loopback-host", "not-its-secret")) as sender:
        result = sender.send_sync(message(client, "AclTopicD", 0))
    assert result.status == client.SendStatus.OK
    assert stored(cluster, "AclTopicD") == 1
    assert "AclException" not in cpp_log.text()


# --- refused ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("credentials", "topic", "reason"),
    [
        pytest.param(
            NORMAL, "AclTopicC", "No default permission for topic:AclTopicC", id="sub-only"
        ),
        pytest.param(NORMAL, "AclTopicA", "No default permission for topic:AclTopicA", id="deny"),
        pytest.param(
            NORMAL, "AclTopicE", "No default permission for topic:AclTopicE", id="default"
        ),
        pytest.param(
            ("nobody-key", "12345678"),
            "AclTopicB",
            "No acl config for nobody-key",
            id="unknown-key",
        ),
        pytest.param(
            ("rocketmq2", "not-the-secret"),
            "AclTopicB",
            "Check signature failed for accessKey=rocketmq2",
            id="wrong-secret",
        ),
        # without credentials the client still signs, with an empty AccessKey
        pytest.param(None, "AclTopicB", "No acl config for ", id="no-credentials"),
    ],
)
def test_a_refused_send(client, cluster, send_failed, cpp_log, credentials, topic, reason):
    before = stored(cluster, topic)
    with producer(client, cluster, "PG-acl-refused", credentials) as sender:
        with pytest.raises(send_failed, match=f"No route info of this topic: {topic}"):
            sender.send_sync(message(client, topic, 0))
    assert cpp_log.shows(f"processSendResponse error remark:{refusal(reason)}, error code:1")
    assert stored(cluster, topic) == before


def test_a_pull_consumer_in_a_group_it_lacks(client, cluster, cpp_log):
    with pull_consumer(client, cluster, "GroupX", NORMAL) as puller:
        bodies, statuses = pull_all(client, puller, "AclTopicB")
    assert (bodies, statuses) == ([], {"BROKER_TIMEOUT"})
    assert cpp_log.shows(refusal("No default permission for group:GroupX"))


def test_a_push_consumer_in_a_denied_group(client, cluster, cpp_log):
    with producer(client, cluster, "PG-acl-normal", NORMAL) as sender:
        sender.send_sync(message(client, "AclTopicB", 0))
    consumer = CollectingConsumer(client, cluster.namesrv_address, "GroupA", "AclTopicB")
    consumer.consumer.set_session_credentials(*NORMAL, CHANNEL)
    with consumer:
        # its heartbeat is refused, then the group's member list: it never rebalances
        assert cpp_log.shows(refusal("No default permission for group:GroupA"))
        assert cpp_log.shows("get error response:1 of heartbeat")
        assert cluster.broker.consumers.group("GroupA") is None
    assert consumer.received == []
    assert cluster.broker.offsets.offsets("GroupA", "AclTopicB") == {}


# --- rules changed while the clients run --------------------------------------------------


def test_a_grant_written_to_the_file_applies_to_the_running_producer(
    client, cluster, send_failed, rules
):
    def sends() -> bool:
        try:
            return sender.send_sync(message(client, "AclTopicC", 0)).status == client.SendStatus.OK
        except send_failed:
            return False

    with producer(client, cluster, "PG-acl-grant", NORMAL) as sender:
        assert not sends()
        rules(RULES.replace("AclTopicC=SUB", "AclTopicC=PUB|SUB"))
        assert wait_until(sends, timeout=20, step=0.1)


def test_loopback_added_to_the_global_white_list_lets_an_unsigned_client_through(
    client, cluster, send_failed, rules
):
    def sends() -> bool:
        try:
            return sender.send_sync(message(client, "AclTopicF", 0)).status == client.SendStatus.OK
        except send_failed:
            return False

    with producer(client, cluster, "PG-acl-unsigned", None) as sender:
        assert not sends()
        rules(RULES.replace("  - 192.168.0.*\n", "  - 192.168.0.*\n  - 127.0.0.1\n"))
        assert wait_until(sends, timeout=20, step=0.1)
    assert stored(cluster, "AclTopicF") >= 1
