"""UPDATE_BROKER_CONFIG: each live key changes what the running broker does at once
(one case per key below), and every other key is refused as read at startup only."""

from __future__ import annotations

import os
import time

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.config import LIVE_KEYS
from rocketmq_core.config import format_properties
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import PERM_READ
from rocketmq_core.protocol.headers import SEND_V2_NAMES, CreateTopicRequestHeader
from rocketmq_core.protocol.message import BatchItem, encode_batch, encode_properties
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.namesrv import namesrv_config

from .wire import pull_request, send_request

pytestmark = pytest.mark.anyio

SUSPEND = 0x2  # PullSysFlag: hold the pull while there is nothing new
OK, REFUSED = ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION
JAVA_DISK_FULL = "service not available now. It may be caused by one of the following reasons:"


@pytest.fixture
async def served(tmp_path, plugin_host):
    """A name server and a broker registered with it; retention quiet unless told."""
    not_now = f"{(time.localtime().tm_hour + 12) % 24:02d}"
    async with NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as namesrv:
        config = broker_config(
            tmp_path / "store",
            namesrv.address,
            delete_when=not_now,
        )
        async with Broker.serving(config, host=plugin_host) as broker:
            yield namesrv, broker


async def update(client, broker, **values):
    body = format_properties(values).encode()
    request = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, body)
    return await client.invoke(broker.address, request)


async def applied(client, broker, **values):
    reply = await update(client, broker, **values)
    assert reply.code == OK, reply.remark


async def send(client, broker, body=b"hello", topic="Live", **properties):
    request = send_request(topic=topic, body=body)
    if properties:
        fields = {"TAGS": "TagA", "UNIQ_KEY": "U1", **properties}
        request.ext_fields[SEND_V2_NAMES["properties"]] = encode_properties(fields)
    return await client.invoke(broker.address, request)


async def pull(client, broker, topic="Live", group="CG", suspend=0):
    request = pull_request(topic=topic, suspend=suspend)
    request.ext_fields["consumerGroup"] = group
    return await client.invoke(broker.address, request, timeout=15)


# --- one case per live key ------------------------------------------------------------------


async def max_message_size(client, broker, namesrv):
    assert (await send(client, broker, b"x" * 2000)).code == OK
    await applied(client, broker, maxMessageSize=1000)
    refused = await send(client, broker, b"x" * 2000)
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    assert "maxMessageSize is 1000" in refused.remark
    # raised past the default, the store's own check follows too
    await applied(client, broker, maxMessageSize=6 << 20)
    big = await send(client, broker, b"x" * (5 << 20))
    assert big.code == OK, big.remark


async def broker_permission(client, broker, namesrv):
    assert (await send(client, broker)).code == OK
    await applied(client, broker, brokerPermission=PERM_READ)
    refused = await send(client, broker)
    assert (refused.code, refused.remark) == (
        REFUSED,
        "the broker[127.0.0.1] sending message is forbidden",
    )
    assert (await pull(client, broker)).code == OK  # still readable
    with anyio.fail_after(5):  # registered again at once, with the topics read-only
        while (route := namesrv.routes.route("Live")) is None or any(
            queue.perm != PERM_READ for queue in route.queue_datas
        ):
            await anyio.sleep(0.02)
    await applied(client, broker, brokerPermission=2)
    refused = await pull(client, broker)
    assert (refused.code, refused.remark) == (
        REFUSED,
        "the broker[127.0.0.1] pulling message is forbidden",
    )
    await applied(client, broker, brokerPermission=6)
    assert (await send(client, broker)).code == OK


async def disk_space_warning_level_ratio(client, broker, namesrv):
    assert (await send(client, broker)).code == OK
    await applied(client, broker, diskSpaceWarningLevelRatio=0)  # any disk is "full"
    refused = await send(client, broker)
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert refused.remark.startswith(JAVA_DISK_FULL)
    assert "diskSpaceWarningLevelRatio 0%" in refused.remark
    assert (await pull(client, broker)).code == OK  # reads go on
    await applied(client, broker, diskSpaceWarningLevelRatio=100)
    assert (await send(client, broker)).code == OK


async def rolled_commit_log(client, broker) -> int:
    """Messages over several CommitLog files (8 MiB each); returns how many files."""
    for _ in range(20):
        assert (await send(client, broker, b"x" * (1 << 20))).code == OK
    files = broker.store.commitlog.files.files
    assert len(files) >= 3
    return len(files)


async def disk_space_clean_forcibly_ratio(client, broker, namesrv):
    await rolled_commit_log(client, broker)
    assert await broker.store.delete_expired() == 0  # young files stay
    await applied(client, broker, diskSpaceCleanForciblyRatio=0)  # "nearly full": oldest go
    assert await broker.store.delete_expired() > 0
    assert broker.store.min_commit_log_offset > 0


async def disk_max_used_space_ratio(client, broker, namesrv):
    await rolled_commit_log(client, broker)
    long_ago = time.time() - 100 * 3600  # past fileReservedTime (72 h)
    for mapped in broker.store.commitlog.files.files[:-1]:
        os.utime(mapped.path, (long_ago, long_ago))
    # the machine's own disk may be fuller than the default 75%: start from "not over it"
    await applied(client, broker, diskMaxUsedSpaceRatio=99)
    assert await broker.store.delete_expired() == 0  # not deleteWhen's hour
    await applied(client, broker, diskMaxUsedSpaceRatio=0)  # over it: expired files go now
    assert await broker.store.delete_expired() > 0


async def long_polling_enable(client, broker, namesrv):
    await short_polling_time_mills(client, broker, namesrv)


async def short_polling_time_mills(client, broker, namesrv):
    assert (await send(client, broker)).code == OK
    request = pull_request(topic="Live", offset=1, sys_flag=SUSPEND | 0x4, suspend=10_000)
    with anyio.move_on_after(1) as held:  # long polling: held for the suspend timeout
        await client.invoke(broker.address, request, timeout=15)
    assert held.cancelled_caught
    await applied(client, broker, longPollingEnable=False, shortPollingTimeMills=200)
    started = time.monotonic()
    reply = await client.invoke(broker.address, request, timeout=15)
    assert reply.code == ResponseCode.PULL_NOT_FOUND
    assert time.monotonic() - started < 2


async def auto_create_subscription_group(client, broker, namesrv):
    assert (await send(client, broker)).code == OK
    assert (await pull(client, broker, group="FirstSeen")).code == OK
    await applied(client, broker, autoCreateSubscriptionGroup=False)
    refused = await pull(client, broker, group="NeverSeen")
    assert refused.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, refused.remark


async def region_id(client, broker, namesrv):
    await applied(client, broker, regionId="Elsewhere", traceOn=False)
    answer = await send(client, broker)
    assert (answer.ext_fields["MSG_REGION"], answer.ext_fields["TRACE_ON"]) == (
        "Elsewhere",
        "false",
    )


async def trace_on(client, broker, namesrv):
    await region_id(client, broker, namesrv)


async def reject_transaction_message(client, broker, namesrv):
    half = {"TRAN_MSG": "true", "PGROUP": "PG"}
    assert (await send(client, broker, **half)).code == OK
    await applied(client, broker, rejectTransactionMessage=True)
    refused = await send(client, broker, **half)
    assert refused.code == REFUSED
    assert "rejectTransactionMessage=true" in refused.remark
    assert (await send(client, broker)).code == OK  # ordinary messages still go


async def max_batch_message_count(client, broker, namesrv):
    def batch(count: int) -> RemotingCommand:
        items = [BatchItem(0, b"x", b"")] * count
        command = send_request(topic="Live", body=encode_batch(items), batch=True)
        command.code = RequestCode.SEND_BATCH_MESSAGE
        return command

    assert (await client.invoke(broker.address, batch(6))).code == OK
    await applied(client, broker, maxBatchMessageCount=5)
    refused = await client.invoke(broker.address, batch(6))
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    assert "more than 5 messages (maxBatchMessageCount)" in refused.remark
    assert (await client.invoke(broker.address, batch(5))).code == OK


async def max_topic_queue_nums(client, broker, namesrv):
    def create(topic: str, queues: int) -> RemotingCommand:
        fields = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=6,
            topic_filter_type="SINGLE_TAG",
        ).to_ext_fields()
        return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)

    assert (await client.invoke(broker.address, create("Wide", 16))).code == OK
    await applied(client, broker, maxTopicQueueNums=8)
    refused = await client.invoke(broker.address, create("Wider", 16))
    assert refused.code == ResponseCode.INVALID_PARAMETER
    assert "at most 8 queues are allowed (maxTopicQueueNums)" in refused.remark
    assert (await client.invoke(broker.address, create("Narrow", 8))).code == OK


LIVE_CASES = {
    "maxMessageSize": max_message_size,
    "brokerPermission": broker_permission,
    "diskSpaceWarningLevelRatio": disk_space_warning_level_ratio,
    "diskSpaceCleanForciblyRatio": disk_space_clean_forcibly_ratio,
    "diskMaxUsedSpaceRatio": disk_max_used_space_ratio,
    "longPollingEnable": long_polling_enable,
    "shortPollingTimeMills": short_polling_time_mills,
    "autoCreateSubscriptionGroup": auto_create_subscription_group,
    "regionId": region_id,
    "traceOn": trace_on,
    "rejectTransactionMessage": reject_transaction_message,
    "maxBatchMessageCount": max_batch_message_count,
    "maxTopicQueueNums": max_topic_queue_nums,
}


def test_every_live_key_has_a_case():
    assert set(LIVE_CASES) == LIVE_KEYS


@pytest.mark.parametrize("key", sorted(LIVE_CASES))
async def test_a_live_key_changes_behaviour_at_once(key, served, client):
    namesrv, broker = served
    await LIVE_CASES[key](client, broker, namesrv)


async def test_every_other_key_is_refused_as_startup_only(served, client):
    _namesrv, broker = served
    startup_only = broker.config.startup_only_keys()
    assert {"flushDiskType", "brokerName", "autoCreateTopicEnable", "serverWorkerThreads"} <= (
        startup_only
    )
    current = broker.config.to_properties()
    for key in sorted(startup_only):
        reply = await update(client, broker, **{key: current.get(key, "1")})
        assert reply.code == REFUSED, key
        assert f"startup only: {key};" in reply.remark, reply.remark
    assert broker.config_version.counter == 0  # nothing was applied
