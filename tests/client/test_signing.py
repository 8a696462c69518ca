"""Clients sign every request when they have credentials (docs/spec/ACL.md §1): the
remoting client, every SDK client, the CLI, and the broker towards name servers. What the
servers receive is recorded on the wire and its signature recomputed."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from rocketmq_core.acl.signing import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    Credentials,
    signature_matches,
)
from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.config import BrokerConfig
from rocketmq_core.cli import main
from rocketmq_core.client.admin import Admin
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.instance import ClientInstance
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import MQClientError, Producer
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.client.transaction import LocalTransactionState, TransactionProducer
from rocketmq_core.errors import ConfigError
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.cluster import EmbeddedCluster
from rocketmq_core.testing.namesrv import namesrv_config
from rocketmq_core.testing.transport import serving
from tests.signed_requests import RequestLog, assert_signed_by, recording

from .conftest import TOPIC, eventually

pytestmark = pytest.mark.anyio

ACCOUNT = Credentials("RocketMQ", "12345678")
BROKER_REQUESTS = {RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER}
BROKER_ACCOUNT = '{"accessKey": "BrokerInner", "secretKey": "inner-secret-1"}'


def from_clients(log: RequestLog) -> list[RemotingCommand]:
    """What a name server received, less the broker's own requests (unsigned here)."""
    return [request for request in log.snapshot() if request.code not in BROKER_REQUESTS]


@pytest.fixture
def on_broker(rocketmq_cluster) -> Iterator[RequestLog]:
    with recording(rocketmq_cluster.broker.server) as log:
        yield log


@pytest.fixture
def on_namesrv(rocketmq_cluster) -> Iterator[RequestLog]:
    with recording(rocketmq_cluster.namesrv.server) as log:
        yield log


@pytest.fixture
def tcp(plugin_host):
    return plugin_host.registry.transports.get("tcp")


# --- the remoting client -----------------------------------------------------------------


async def test_the_remoting_client_signs_requests_oneway_and_callback_ones_too(tcp):
    received: list[RemotingCommand] = []

    def keep(ctx, request: RemotingCommand) -> RemotingCommand:
        received.append(request)
        return request.response()

    table = ProcessorTable()
    table.register(RequestCode.SEND_MESSAGE, keep)
    token = Credentials("RocketMQ", "12345678", security_token="session-token")
    fields = {"topic": "TopicTest", "queueId": "0", "_UNIQUE_KEY_QUERY": "k"}
    async with serving(tcp, table) as (_server, address):
        async with RemotingClient(tcp, credentials=token) as client:
            await client.invoke(address, RemotingCommand.request(10, fields, b"Hello RocketMQ"))
            await client.invoke_oneway(address, RemotingCommand.request(10, fields))
            answered = anyio.Event()
            client.invoke_callback(
                address, RemotingCommand.request(10, fields, b"x"), lambda *_: answered.set()
            )
            await answered.wait()
            await eventually(lambda: len(received) == 3)
        async with RemotingClient(tcp) as unsigned:
            await unsigned.invoke(address, RemotingCommand.request(10, fields))
    signed, plain = received[:3], received[3]
    assert_signed_by(signed, token)
    assert all(request.ext_fields[SECURITY_TOKEN] == "session-token" for request in signed)
    assert signed[0].ext_fields["topic"] == "TopicTest"  # the header is left as it was
    # a changed body or field no longer matches: the signature covers both
    signed[0].body = b"Hello RocketMQ!"
    assert not signature_matches(signed[0], "12345678")
    assert ACCESS_KEY not in plain.ext_fields and SIGNATURE not in plain.ext_fields


# --- every SDK client --------------------------------------------------------------------


async def test_every_sdk_client_signs_what_the_broker_and_name_server_receive(
    rocketmq_cluster, on_broker, on_namesrv
):
    cluster = rocketmq_cluster
    cluster.create_topic(TOPIC)
    config = ClientConfig(cluster.namesrv_address, credentials=ACCOUNT)

    async with Producer("PG_signed", config=config) as producer:
        await producer.send(Message(TOPIC, b"hello", tags="A"))
        await producer.send_batch([Message(TOPIC, b"one"), Message(TOPIC, b"two")])
    async with PullConsumer("CG_pull_signed", config=config) as consumer:
        queue = MessageQueue(TOPIC, "broker-a", 0)
        await consumer.pull(queue, 0)
        await consumer.commit(queue, 1)

    bodies: list[bytes] = []

    async def listener(messages):
        bodies.extend(message.body for message in messages)

    push = PushConsumer("CG_push_signed", config=config, listener=listener, consume_from="first")
    push.subscribe(TOPIC)
    async with push:
        await eventually(lambda: len(bodies) == 3)

    async def commit(message, state):
        return LocalTransactionState.COMMIT

    async with TransactionProducer(
        "PG_txn_signed", config=config, executor=commit, checker=commit
    ) as txn:
        await txn.send_in_transaction(Message(TOPIC, b"half"))
    async with Admin(config=config) as admin:
        await admin.cluster_info()
        await admin.list_topics()

    codes = on_broker.codes()
    for code in (
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.PULL_MESSAGE,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.HEART_BEAT,
        RequestCode.END_TRANSACTION,
        RequestCode.UNREGISTER_CLIENT,
    ):
        assert code in codes, RequestCode(code).name
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC in on_namesrv.codes()
    assert RequestCode.GET_BROKER_CLUSTER_INFO in on_namesrv.codes()
    # every request of every client, to the broker and to the name server
    assert_signed_by(on_broker.snapshot(), ACCOUNT)
    assert_signed_by(from_clients(on_namesrv), ACCOUNT)


async def test_credentials_stay_out_of_repr_and_need_both_keys():
    config = ClientConfig("127.0.0.1:9876", credentials=Credentials("RocketMQ", "s3cret-key"))
    assert "s3cret-key" not in repr(config) and "RocketMQ" in repr(config)
    with pytest.raises(ConfigError, match="no secret key"):
        ClientInstance(ClientConfig("127.0.0.1:9876", credentials=Credentials("RocketMQ", "")))
    with pytest.raises(ConfigError, match="no access key"):
        ClientInstance(ClientConfig("127.0.0.1:9876", credentials=Credentials("", "secret")))


# --- the broker's own requests -----------------------------------------------------------


@pytest.mark.rocketmq(inner_client_authentication_credentials=BROKER_ACCOUNT)
async def test_the_broker_signs_its_registration_with_its_inner_credentials(
    rocketmq_cluster, on_namesrv
):
    cluster = rocketmq_cluster
    cluster.create_topic(TOPIC)  # a new topic: the broker registers again at once
    await eventually(lambda: RequestCode.REGISTER_BROKER in on_namesrv.codes())
    assert_signed_by(on_namesrv.snapshot(), Credentials("BrokerInner", "inner-secret-1"))
    # the secret is not handed to whoever asks for the broker's configuration
    config = ClientConfig(cluster.namesrv_address)
    async with Admin(config=config) as admin:
        text = await admin.broker_config(cluster.broker_address)
    assert "innerClientAuthenticationCredentials" not in text and text["brokerName"]
    assert "inner-secret-1" not in repr(cluster.broker.config)


async def test_a_slave_signs_its_sync_requests_to_the_master(tmp_path, plugin_host):
    async with NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as namesrv:
        master_config = broker_config(tmp_path / "master", namesrv.address)
        async with Broker.serving(master_config, host=plugin_host) as master:
            slave_config = broker_config(
                tmp_path / "slave",
                namesrv.address,
                broker_role="SLAVE",
                broker_id=1,
                slave_sync_delay=0,
                slave_sync_interval=50,  # the first round may come before the master is known
                inner_client_authentication_credentials=BROKER_ACCOUNT,
            )
            with recording(master.server) as on_master:
                async with Broker.serving(slave_config, host=plugin_host):
                    wanted = {RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_ALL_CONSUMER_OFFSET}
                    await eventually(lambda: wanted <= on_master.codes())
    assert_signed_by(on_master.snapshot(), Credentials("BrokerInner", "inner-secret-1"))


@pytest.mark.parametrize(
    "value, problem",
    [
        ("not json", "it is not JSON"),
        ('["a", "b"]', "not a JSON list"),
        ('{"accessKey": "ak"}', "its secretKey is missing"),
        ('{"secretKey": "sk", "accessKey": ""}', "its accessKey is missing"),
    ],
)
def test_bad_inner_credentials_are_a_config_error_naming_the_key(value, problem):
    config = BrokerConfig()
    config.update({"innerClientAuthenticationCredentials": value})
    with pytest.raises(ConfigError, match=f"innerClientAuthenticationCredentials.*{problem}"):
        config.inner_client_credentials()


# --- end to end: brokers and name servers with aclEnable=true -----------------------------

RULES = """\
accounts:
  - {accessKey: RocketMQ, secretKey: "12345678", defaultTopicPerm: PUB|SUB, defaultGroupPerm: SUB}
  - {accessKey: BrokerInner, secretKey: inner-secret-1, admin: true}
"""


@pytest.fixture
def acl_cluster(tmp_path):
    """Name server and broker both checking ACL; the broker registers with its own account."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(RULES)
    acl = {"acl_enable": True, "rocketmq_home": str(home)}
    with EmbeddedCluster(
        tmp_path / "cluster",
        store="memory",
        namesrv_overrides=acl,
        inner_client_authentication_credentials=BROKER_ACCOUNT,
        **acl,
    ) as cluster:
        cluster.create_topic(TOPIC)  # routed: the name server took the signed registration
        yield cluster


async def test_with_acl_on_signed_clients_work_and_a_wrong_secret_is_refused_clearly(
    acl_cluster,
):
    config = ClientConfig(acl_cluster.namesrv_address, credentials=ACCOUNT)
    async with Producer("PG_acl", config=config) as producer:
        sent = await producer.send(Message(TOPIC, b"signed"))
    async with PullConsumer("CG_acl", config=config) as consumer:
        found = await consumer.pull(sent.queue, sent.queue_offset)
    assert [message.body for message in found.messages] == [b"signed"]

    wrong = ClientConfig(acl_cluster.namesrv_address, credentials=Credentials("RocketMQ", "nope"))
    async with Producer("PG_acl", config=wrong, retry_times=0) as producer:
        with pytest.raises(MQClientError, match="Check signature failed for accessKey=RocketMQ"):
            await producer.send(Message(TOPIC, b"refused"))


def test_with_acl_on_the_cli_says_in_one_line_why_it_was_refused(acl_cluster, capsys):
    namesrv = ["-n", acl_cluster.namesrv_address, "--access-key", "RocketMQ"]
    assert main(["send", "-t", TOPIC, "--body", "x", *namesrv, "--secret-key", "12345678"]) == 0
    capsys.readouterr()
    assert main(["send", "-t", TOPIC, "--body", "x", *namesrv, "--secret-key", "wrong"]) == 1
    err = capsys.readouterr().err  # a refused heartbeat may be logged before it
    (error,) = [line for line in err.splitlines() if line.startswith("rocketmq send: error:")]
    assert "Check signature failed for accessKey=RocketMQ" in error
    assert error.count("Check signature failed") == 1  # the same refusal of each retry: once
    assert "wrong" not in err


# --- the command line --------------------------------------------------------------------


def test_cli_commands_sign_with_the_options_or_the_environment(
    rocketmq_cluster, on_broker, on_namesrv, capsys, monkeypatch
):
    cluster = rocketmq_cluster
    cluster.create_topic(TOPIC)
    namesrv = ["-n", cluster.namesrv_address]
    keys = ["--access-key", "RocketMQ", "--secret-key", "12345678"]
    assert main(["send", "-t", TOPIC, "--body", "from the cli", *namesrv, *keys]) == 0
    assert main(["topic", "list", *namesrv, *keys]) == 0
    monkeypatch.setenv("ROCKETMQ_ACCESS_KEY", "RocketMQ")
    monkeypatch.setenv("ROCKETMQ_SECRET_KEY", "12345678")
    assert main(["cluster", "list", *namesrv]) == 0
    capsys.readouterr()
    assert RequestCode.SEND_MESSAGE_V2 in on_broker.codes()
    assert RequestCode.GET_BROKER_CLUSTER_INFO in on_namesrv.codes()
    assert_signed_by(on_broker.snapshot(), ACCOUNT)
    assert_signed_by(from_clients(on_namesrv), ACCOUNT)


@pytest.mark.parametrize(
    "args, env, missing",
    [
        (["--access-key", "RocketMQ"], {}, "no secret key: add --secret-key"),
        (["--secret-key", "12345678"], {}, "no access key: add --access-key"),
        ([], {"ROCKETMQ_SECRET_KEY": "12345678"}, "no access key: add --access-key"),
        ([], {"ROCKETMQ_ACCESS_KEY": "RocketMQ"}, "no secret key: add --secret-key"),
    ],
)
def test_a_key_without_its_secret_is_a_usage_error(args, env, missing, capsys, monkeypatch):
    monkeypatch.delenv("ROCKETMQ_ACCESS_KEY", raising=False)
    monkeypatch.delenv("ROCKETMQ_SECRET_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["topic", "list", "-n", "127.0.0.1:1", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and missing in err
    assert "12345678" not in err
