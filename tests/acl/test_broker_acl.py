"""A real broker with aclEnable=true, and requests signed by hand (ACL.md §0-§4)."""

from __future__ import annotations

import logging
import textwrap

import anyio
import pytest

from rocketmq_core.acl.signing import Credentials, sign
from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.pop.headers import PopMessageRequestHeader
from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import CreateTopicRequestHeader, GetMaxOffsetRequestHeader
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.broker import broker_config
from tests.broker.wire import pull_request, send_request

pytestmark = pytest.mark.anyio

PRODUCER = Credentials("producer-key", "producer-secret")
CONSUMER = Credentials("consumer-key", "consumer-secret")
ADMIN = Credentials("admin-key-1", "admin-secret")
JAVA = "org.apache.rocketmq.acl.common.AclException: "
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
    topicPerms: [Payments=DENY]
  - accessKey: admin-key-1
    secretKey: admin-secret
    admin: true
  - accessKey: trusted-host
    secretKey: trusted-secret
    whiteRemoteAddress: 127.0.0.*
  - accessKey: remote-host
    secretKey: remote-secret
    whiteRemoteAddress: 10.9.9.*
"""


def write_rules(home, text):
    path = home / "conf" / "plain_acl.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
async def broker(tmp_path, plugin_host):
    write_rules(tmp_path / "home", RULES)
    config = broker_config(
        tmp_path / "store",
        acl_enable=True,
        rocketmq_home=str(tmp_path / "home"),
        acl_file_watch_interval=50,
    )
    async with Broker.serving(config, host=plugin_host) as running:
        yield running


@pytest.fixture
async def client(plugin_host):
    async with RemotingClient(plugin_host.registry.transports.get("tcp")) as remoting:
        yield remoting


def signed(request, credentials):
    sign(request, credentials)
    return request


def create_topic(topic):
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=4,
        write_queue_nums=4,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())


def max_offset(topic):
    header = GetMaxOffsetRequestHeader(topic=topic, queue_id=0)
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header.to_ext_fields())


def assert_refused(response, message):
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == f"{JAVA}{message}, rocketmq_core.acl.validator"


async def test_permission_kinds(broker, client):
    address = broker.address
    sent = await client.invoke(address, signed(send_request("Orders"), PRODUCER))
    assert sent.code == ResponseCode.SUCCESS
    refused = await client.invoke(address, signed(send_request("Payments"), PRODUCER))
    assert_refused(refused, "No default permission for topic:Payments")
    # the consumer: SUB on topics by default, Payments denied, group CG only
    pulled = await client.invoke(address, signed(pull_request("Orders", suspend=0), CONSUMER))
    assert pulled.code != ResponseCode.SYSTEM_ERROR
    denied = await client.invoke(address, signed(pull_request("Payments", suspend=0), CONSUMER))
    assert_refused(denied, "No default permission for topic:Payments")
    no_pub = await client.invoke(address, signed(send_request("Orders"), CONSUMER))
    assert_refused(no_pub, "No default permission for topic:Orders")
    other_group = pull_request("Orders", suspend=0)
    other_group.ext_fields["consumerGroup"] = "OtherGroup"
    refused_group = await client.invoke(address, signed(other_group, CONSUMER))
    assert_refused(refused_group, "No default permission for group:OtherGroup")


def pop_request(topic, group):
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=-1,
        max_msg_nums=1,
        invisible_time=30_000,
        poll_time=0,
        born_time=0,
        init_mode=0,
    )
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())


async def test_pop_is_checked_like_a_pull(broker, client):
    address = broker.address
    popped = await client.invoke(address, signed(pop_request("Orders", "CG"), CONSUMER))
    assert popped.code != ResponseCode.SYSTEM_ERROR
    denied = await client.invoke(address, signed(pop_request("Payments", "CG"), CONSUMER))
    assert_refused(denied, "No default permission for topic:Payments")
    other_group = await client.invoke(address, signed(pop_request("Orders", "Other"), CONSUMER))
    assert_refused(other_group, "No default permission for group:Other")
    no_sub = await client.invoke(address, signed(pop_request("Orders", "CG"), PRODUCER))
    assert_refused(no_sub, "No default permission for topic:Orders")


async def test_admin_only_codes(broker, client):
    for credentials in (PRODUCER, CONSUMER):
        refused = await client.invoke(broker.address, signed(create_topic("NewTopic"), credentials))
        assert_refused(
            refused,
            "Need admin permission for request code=17,"
            f" but accessKey={credentials.access_key} is not",
        )
    created = await client.invoke(broker.address, signed(create_topic("NewTopic"), ADMIN))
    assert created.code == ResponseCode.SUCCESS
    assert "NewTopic" in broker.topics.table
    # what else changes topics, groups, the config or offsets: refused before its header
    # is even read
    for code in (
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.CLONE_GROUP_OFFSET,
    ):
        request = signed(RemotingCommand.request(code, {}), CONSUMER)
        refused = await client.invoke(broker.address, request)
        assert_refused(
            refused,
            f"Need admin permission for request code={code}, but accessKey=consumer-key is not",
        )


async def test_refusals_by_identity_and_signature(broker, client, caplog):
    address = broker.address
    unsigned = await client.invoke(address, send_request("Orders"))
    assert_refused(unsigned, "No accessKey is configured")
    stranger = await client.invoke(
        address, signed(send_request("Orders"), Credentials("stranger-key", "whatever1"))
    )
    assert_refused(stranger, "No acl config for stranger-key")
    wrong = await client.invoke(
        address, signed(send_request("Orders"), Credentials("producer-key", "not-the-secret"))
    )
    assert_refused(wrong, "Check signature failed for accessKey=producer-key")
    tampered = signed(send_request("Orders"), PRODUCER)
    tampered.body = b"changed after signing"
    refused = await client.invoke(address, tampered)
    assert_refused(refused, "Check signature failed for accessKey=producer-key")
    assert "producer-secret" not in caplog.text
    # still served on the same connection after refusals
    again = await client.invoke(address, signed(send_request("Orders"), PRODUCER))
    assert again.code == ResponseCode.SUCCESS


async def test_account_white_list(broker, client):
    # 127.0.0.* for trusted-host: no signature needed, nor permissions
    unsigned = send_request("Anything")
    unsigned.ext_fields["AccessKey"] = "trusted-host"
    served = await client.invoke(broker.address, unsigned)
    assert served.code == ResponseCode.SUCCESS
    # 10.9.9.* for remote-host: this peer (127.0.0.1) is outside it, so it must sign
    outside = send_request("Anything")
    outside.ext_fields["AccessKey"] = "remote-host"
    refused = await client.invoke(broker.address, outside)
    assert_refused(refused, "Check signature failed for accessKey=remote-host")


async def test_oneway_refusal_gets_no_answer_and_stores_nothing(broker, client):
    oneway = send_request("Orders")
    oneway.flag |= 0x2  # RPC_ONEWAY
    await client.invoke_oneway(broker.address, oneway)  # unsigned: refused, no answer
    offset = await client.invoke(broker.address, signed(max_offset("Orders"), PRODUCER))
    assert offset.code in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)
    assert int(offset.ext_fields.get("offset", "0")) == 0


async def until(predicate, seconds=5.0):
    with anyio.fail_after(seconds):
        while not await predicate():
            await anyio.sleep(0.05)


async def test_rule_change_applies_while_running(broker, client, tmp_path):
    async def payments_allowed():
        response = await client.invoke(broker.address, signed(send_request("Payments"), PRODUCER))
        return response.code == ResponseCode.SUCCESS

    assert not await payments_allowed()
    write_rules(tmp_path / "home", RULES.replace("[Orders=PUB]", "[Orders=PUB, Payments=PUB]"))
    await until(payments_allowed)


async def test_global_white_list_added_while_running(broker, client, tmp_path):
    async def unsigned_allowed():
        response = await client.invoke(broker.address, send_request("Orders"))
        return response.code == ResponseCode.SUCCESS

    assert not await unsigned_allowed()
    write_rules(tmp_path / "home", "globalWhiteRemoteAddresses: [127.0.0.1]\n" + RULES)
    await until(unsigned_allowed)


async def test_bad_edit_keeps_the_rules_in_force(broker, client, tmp_path, caplog):
    path = write_rules(tmp_path / "home", RULES + "  - accessKey: short\n    secretKey: x\n")
    with caplog.at_level(logging.ERROR, "rocketmq.acl"):
        with anyio.fail_after(5):
            while "not reloaded" not in caplog.text:
                await anyio.sleep(0.05)
        await anyio.sleep(0.3)  # several more polls: still one line
    lines = [r.getMessage() for r in caplog.records if "not reloaded" in r.getMessage()]
    assert len(lines) == 1
    assert str(path) in lines[0] and "accessKey must be longer than 6" in lines[0]
    sent = await client.invoke(broker.address, signed(send_request("Orders"), PRODUCER))
    assert sent.code == ResponseCode.SUCCESS


async def test_start_refuses_bad_rules(tmp_path, plugin_host):
    write_rules(tmp_path / "home", "accounts: [{accessKey: RocketMQ, secretKey: '1'}]\n")
    config = broker_config(
        tmp_path / "store", acl_enable=True, rocketmq_home=str(tmp_path / "home")
    )
    with pytest.raises(BaseExceptionGroup) as caught:  # as the task group wraps it
        async with Broker.serving(config, host=plugin_host):
            pass
    assert caught.group_contains(ConfigError, match=r"plain_acl.yml: accounts\[0\] .*secretKey")


async def test_acl_off_by_default(tmp_path, plugin_host, client):
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        assert broker.acl is None and broker.server.hooks == ()
        sent = await client.invoke(broker.address, send_request("Orders"))
        assert sent.code == ResponseCode.SUCCESS
