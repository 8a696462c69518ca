"""POP on a real broker over TCP, driven with the headers a Java 5.x client sends: pop,
ack, revive after the invisible time, change invisible time, retries up to the DLQ,
peek, notification, polling info and long polling."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.pop import pop_service
from rocketmq_core.broker.pop import service as pop_service_module
from rocketmq_core.broker.pop.headers import (
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
)
from rocketmq_core.broker.pop.keys import CK_TAG
from rocketmq_core.broker.pop.records import Checkpoint, encode_bitset
from rocketmq_core.config import format_properties
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.bodies.groups import SubscriptionGroupConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.message import iter_records
from rocketmq_core.testing.broker import broker_config
from tests.broker.pop_wire import (
    GROUP,
    TOPIC,
    ack_request,
    change_request,
    pop_request,
    pop_until,
    popped_messages,
)
from tests.broker.wire import send_request

pytestmark = pytest.mark.anyio


async def setup(broker, client, count=3, queues=1, retry_max_times=16, topic=TOPIC):
    broker.topics.update(TopicConfig(topic, queues, queues, 6))
    broker.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=retry_max_times))
    for index in range(count):
        sent = await client.invoke(
            broker.address, send_request(topic, f"m{index}".encode(), queue_id=index % queues)
        )
        assert sent.code == ResponseCode.SUCCESS, sent.remark


async def test_pop_hands_out_messages_with_handles_and_hides_them(broker, client):
    await setup(broker, client)
    response = await client.invoke(broker.address, pop_request())
    assert response.code == ResponseCode.SUCCESS, response.remark
    fields = response.ext_fields
    assert fields["reviveQid"] in {str(qid) for qid in range(8)}
    assert fields["startOffsetInfo"] == "0 0 0"
    assert fields["msgOffsetInfo"] == "0 0 0,1,2"
    popped = popped_messages(response)
    assert [p.body for p in popped] == [b"m0", b"m1", b"m2"]
    assert popped[1].handle.split(" ")[:1] + popped[1].handle.split(" ")[4:] == [
        "0",
        "0",
        "broker-a",
        "0",
        "1",
    ]
    again = await client.invoke(broker.address, pop_request())
    assert again.code == ResponseCode.POLLING_TIMEOUT
    assert popped_messages(again) == []


async def test_acked_messages_never_come_back(broker, client):
    await setup(broker, client, count=2)
    popped = popped_messages(await client.invoke(broker.address, pop_request(invisible_ms=1000)))
    for one in popped:
        acked = await client.invoke(broker.address, ack_request(one))
        assert acked.code == ResponseCode.SUCCESS, acked.remark
    revive = pop_service(broker).revive
    await revive.scan()
    assert revive.open_checkpoints == 0  # every message of the checkpoint acked: forgotten
    response = await client.invoke(broker.address, pop_request(poll_ms=1500))
    assert response.code == ResponseCode.POLLING_TIMEOUT  # 1.5 s: past the invisible time
    assert revive.revived == 0


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_an_ack_is_answered_in_the_call(tmp_path, plugin_host, client, flush):
    """No task per ack: its record, as Java's, waits for no flush (WAIT=false), on a
    SYNC_FLUSH broker too."""
    config = broker_config(tmp_path, flush_disk_type=flush)
    async with Broker.serving(config, host=plugin_host) as broker:
        await setup(broker, client, count=2)
        route = broker.server.processors.lookup(RequestCode.ACK_MESSAGE)
        assert route is not None
        processor, answers = route.processor, []

        def kept(ctx, request):
            answers.append(answer := processor(ctx, request))
            return answer

        route.processor = kept
        popped = popped_messages(await client.invoke(broker.address, pop_request()))
        for one in popped:
            acked = await client.invoke(broker.address, ack_request(one))
            assert acked.code == ResponseCode.SUCCESS, acked.remark
        assert [type(answer) for answer in answers] == [RemotingCommand] * 2
        revive = pop_service(broker).revive
        await revive.scan()
        assert revive.open_checkpoints == 0


async def test_an_ack_the_store_refuses_is_a_system_error_and_the_message_comes_back(
    tmp_path, plugin_host, client
):
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        await setup(broker, client, count=1)
        (popped,) = popped_messages(
            await client.invoke(broker.address, pop_request(invisible_ms=1000))
        )
        full = {"diskSpaceWarningLevelRatio": 0}  # any disk is "full": nothing is stored
        request = RemotingCommand.request(
            RequestCode.UPDATE_BROKER_CONFIG, {}, format_properties(full).encode()
        )
        assert (await client.invoke(broker.address, request)).code == ResponseCode.SUCCESS
        refused = await client.invoke(broker.address, ack_request(popped))
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark == "the ack could not be stored; retry"
        request.body = format_properties({"diskSpaceWarningLevelRatio": 90}).encode()
        assert (await client.invoke(broker.address, request)).code == ResponseCode.SUCCESS
        (again,) = await pop_until(client, broker.address)
        assert (again.body, again.message.reconsume_times) == (b"m0", 1)  # not acked: back


async def test_unacked_messages_come_back_with_a_reconsume_time(broker, client):
    await setup(broker, client, count=2)
    first = popped_messages(await client.invoke(broker.address, pop_request(invisible_ms=1000)))
    await client.invoke(broker.address, ack_request(first[0]))  # m0 done, m1 forgotten
    back = await pop_until(client, broker.address)
    assert [p.body for p in back] == [b"m1"]
    assert back[0].message.reconsume_times == 1
    assert back[0].message.topic == TOPIC  # handed out under the topic asked for
    assert back[0].handle.split(" ")[4] == "1"  # read from %RETRY%PopGroup_PopOrders
    assert "1ST_POP_TIME" in back[0].message.properties
    assert (await client.invoke(broker.address, ack_request(back[0]))).code == ResponseCode.SUCCESS
    assert broker.topics.get(f"%RETRY%{GROUP}_{TOPIC}") is not None


async def test_two_open_checkpoints_of_one_key_both_bring_back_their_messages(broker, client):
    """A checkpoint written with the key (queue, start offset, pop time, ...) of one still
    open is kept beside it: replacing the first lost its unacked messages for good."""
    await setup(broker, client, count=2)
    service = pop_service(broker)
    now = 1_700_000_000_000
    for diffs in ([0], [1]):  # m0's checkpoint, then m1's, one key
        checkpoint = Checkpoint(0, now, 1_000, 0, TOPIC, GROUP, "broker-a", diffs)
        assert await service._append_revive_record(
            0, CK_TAG, checkpoint.encode(), checkpoint.unique_key() + str(diffs)
        )
    revive = service.revive
    assert await revive.scan(now_ms=now) == 0
    assert revive.open_checkpoints == 2
    assert await revive.scan(now_ms=now + 1_000) == 2  # m0 and m1
    assert revive.open_checkpoints == 0
    assert broker.store.max_offset(f"%RETRY%{GROUP}_{TOPIC}", 0) == 2


async def test_a_message_in_two_open_checkpoints_of_one_key_comes_back_once(broker, client):
    await setup(broker, client, count=1)
    service = pop_service(broker)
    now = 1_700_000_000_000
    for copy in range(2):  # the same checkpoint written twice
        checkpoint = Checkpoint(0, now, 1_000, 0, TOPIC, GROUP, "broker-a", [0])
        assert await service._append_revive_record(
            0, CK_TAG, checkpoint.encode(), checkpoint.unique_key() + str(copy)
        )
    revive = service.revive
    assert await revive.scan(now_ms=now + 1_000) == 1
    assert revive.open_checkpoints == 0
    assert broker.store.max_offset(f"%RETRY%{GROUP}_{TOPIC}", 0) == 1


async def test_change_invisible_time_shortens_and_extends(broker, client):
    # revive is driven with a clock of the test's choosing: each checkpoint's time is
    # passed exactly, and an old checkpoint not acked by the change would come back too
    await setup(broker, client, count=2)
    revive = pop_service(broker).revive
    popped = await client.invoke(broker.address, pop_request(invisible_ms=600_000))
    first_pop = int(popped.ext_fields["popTime"])
    m0, _ = popped_messages(popped)
    shortened = await client.invoke(broker.address, change_request(m0, 300_000))
    assert shortened.code == ResponseCode.SUCCESS, shortened.remark
    assert shortened.ext_fields["invisibleTime"] == "300000"
    assert await revive.scan(now_ms=int(shortened.ext_fields["popTime"]) + 300_000) == 1

    retried = await client.invoke(broker.address, pop_request(invisible_ms=60_000))
    (back,) = popped_messages(retried)
    assert back.body == b"m0" and back.message.reconsume_times == 1
    extended = await client.invoke(broker.address, change_request(back, 900_000))
    assert extended.code == ResponseCode.SUCCESS, extended.remark
    # the retry's 60 s and the first POP's 10 minutes are over: only m1 comes back
    assert await revive.scan(now_ms=first_pop + 600_000) == 1
    assert await revive.scan(now_ms=int(extended.ext_fields["popTime"]) + 900_000) == 1
    retry = f"%RETRY%{GROUP}_{TOPIC}"
    got = await broker.store.get(retry, 0, 0, 8)
    assert [m.body for m in iter_records(got.body)] == [b"m0", b"m1", b"m0"]


async def test_a_change_in_the_pops_own_millisecond_still_brings_the_message_back(
    broker, client, monkeypatch
):
    """A checkpoint is named by queue, start offset and pop time: a change of the batch's
    first message in the POP's own millisecond must not make a checkpoint the old one's
    ack also cancels (the new pop time is at least one ms later)."""
    await setup(broker, client, count=1)
    revive = pop_service(broker).revive
    popped = await client.invoke(broker.address, pop_request(invisible_ms=600_000))
    first_pop = int(popped.ext_fields["popTime"])
    (m0,) = popped_messages(popped)
    monkeypatch.setattr(pop_service_module, "now_ms", lambda: first_pop)  # the same ms
    changed = await client.invoke(broker.address, change_request(m0, 300_000))
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    assert int(changed.ext_fields["popTime"]) == first_pop + 1
    assert await revive.scan(now_ms=first_pop + 1 + 300_000) == 1


async def test_a_change_whose_old_checkpoint_cannot_be_acked_is_an_error(
    broker, client, monkeypatch
):
    # fault injection: the revive topic refuses the ack of the old checkpoint (a full
    # disk between the two appends), the new checkpoint is stored as usual
    await setup(broker, client, count=1)
    service = pop_service(broker)
    append = service._append_revive_record

    async def refuse_acks(revive_qid, tag, body, unique_key):
        return tag == "ck" and await append(revive_qid, tag, body, unique_key)

    (popped,) = popped_messages(await client.invoke(broker.address, pop_request()))
    monkeypatch.setattr(service, "_append_revive_record", refuse_acks)
    changed = await client.invoke(broker.address, change_request(popped, 5_000))
    assert changed.code == ResponseCode.SYSTEM_ERROR
    assert "could not be cancelled" in changed.remark and "retry" in changed.remark


async def test_after_retry_max_times_the_message_goes_to_the_dlq(broker, client):
    await setup(broker, client, count=1, retry_max_times=1)
    await client.invoke(broker.address, pop_request(invisible_ms=500))
    back = await pop_until(client, broker.address, invisible_ms=500)
    assert back[0].message.reconsume_times == 1
    dlq = f"%DLQ%{GROUP}"
    with anyio.fail_after(30):
        while broker.store.max_offset(dlq, 0) == 0:
            await anyio.sleep(0.1)
    got = await broker.store.get(dlq, 0, 0, 1)
    (dead,) = iter_records(got.body)
    assert dead.body == b"m0" and dead.reconsume_times == 2
    assert broker.stats.dead_letters == {(GROUP, TOPIC): 1}  # under its first topic
    response = await client.invoke(broker.address, pop_request(poll_ms=1000))
    assert response.code == ResponseCode.POLLING_TIMEOUT


async def test_a_held_pop_is_woken_by_a_new_message(broker, client):
    await setup(broker, client, count=0)
    results = []

    async def pop_held():
        results.append(await client.invoke(broker.address, pop_request(poll_ms=20_000), 25))

    async with anyio.create_task_group() as group:
        group.start_soon(pop_held)
        info = PollingInfoRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=-1)
        request = RemotingCommand.request(RequestCode.POLLING_INFO, info.to_ext_fields())
        with anyio.fail_after(10):
            while True:
                polling = await client.invoke(broker.address, request)
                if polling.ext_fields["pollingNum"] == "1":
                    break
                await anyio.sleep(0.05)
        await client.invoke(broker.address, send_request(TOPIC, b"late"))
    assert [p.body for p in popped_messages(results[0])] == [b"late"]


async def test_pop_hears_of_new_messages_only_once_a_pop_waited(broker, client):
    # a broker nobody long-polls with POP pays nothing per stored message
    holds = pop_service(broker).holds
    await setup(broker, client, count=1)
    assert popped_messages(await client.invoke(broker.address, pop_request()))
    assert not holds.listening and holds not in broker.store._dispatchers
    response = await client.invoke(broker.address, pop_request(poll_ms=200))
    assert response.code == ResponseCode.POLLING_TIMEOUT
    assert holds.listening and broker.store._dispatchers.count(holds) == 1


async def test_a_pop_beyond_the_held_limit_is_told_polling_full(broker, client):
    await setup(broker, client, count=0)
    pop_service(broker).holds.limit = 1
    results = []

    async def pop_held():
        results.append(await client.invoke(broker.address, pop_request(poll_ms=20_000), 25))

    async with anyio.create_task_group() as group:
        group.start_soon(pop_held)
        with anyio.fail_after(10):
            while pop_service(broker).polling_info(GROUP, TOPIC, -1) == 0:
                await anyio.sleep(0.05)
        full = await client.invoke(broker.address, pop_request(poll_ms=5_000))
        await client.invoke(broker.address, send_request(TOPIC, b"late"))
    assert full.code == ResponseCode.POLLING_FULL
    assert full.remark == (
        f"POLLING_FULL: 1 POP requests already wait on topic {TOPIC}; retry in a moment"
    )
    assert results[0].code == ResponseCode.SUCCESS


async def test_peek_and_notification_change_nothing(broker, client):
    await setup(broker, client, count=2)
    peek = PeekMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=8)
    peeked = await client.invoke(
        broker.address, RemotingCommand.request(RequestCode.PEEK_MESSAGE, peek.to_ext_fields())
    )
    assert [m.body for m in iter_records(peeked.body)] == [b"m0", b"m1"]
    notify = NotificationRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=-1, poll_time=0, born_time=0
    )
    request = RemotingCommand.request(RequestCode.NOTIFICATION, notify.to_ext_fields())
    assert (await client.invoke(broker.address, request)).ext_fields["hasMsg"] == "true"
    popped = popped_messages(await client.invoke(broker.address, pop_request()))
    assert len(popped) == 2
    assert (await client.invoke(broker.address, request)).ext_fields["hasMsg"] == "false"


async def test_batch_ack_acks_the_set_bits(broker, client):
    await setup(broker, client, count=3)
    response = await client.invoke(broker.address, pop_request(invisible_ms=1000))
    fields = response.ext_fields
    body = {
        "brokerName": "broker-a",
        "acks": [
            {
                "c": GROUP,
                "t": TOPIC,
                "r": "0",
                "so": 0,
                "q": 0,
                "rq": int(fields["reviveQid"]),
                "pt": int(fields["popTime"]),
                "it": int(fields["invisibleTime"]),
                "b": encode_bitset([0, 2]),
            }
        ],
    }
    import orjson

    acked = await client.invoke(
        broker.address,
        RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, orjson.dumps(body)),
    )
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    back = await pop_until(client, broker.address)
    assert [p.body for p in back] == [b"m1"]


async def test_bad_handles_and_offsets_get_clear_errors(broker, client):
    await setup(broker, client, count=1)
    (popped,) = popped_messages(await client.invoke(broker.address, pop_request()))
    popped.handle = "not a handle"
    refused = await client.invoke(broker.address, ack_request_raw(extra_info="1 2", offset=0))
    assert refused.code == ResponseCode.INVALID_PARAMETER
    assert "POP handle" in refused.remark
    far = await client.invoke(
        broker.address, ack_request_raw(extra_info="0 1 2 0 0 broker-a 0 5", offset=5)
    )
    assert far.code == ResponseCode.NO_MESSAGE
    missing = await client.invoke(broker.address, pop_request(topic="NoSuchTopic"))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST


def ack_request_raw(extra_info: str, offset: int) -> RemotingCommand:
    from rocketmq_core.broker.pop.headers import AckMessageRequestHeader

    header = AckMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=0, extra_info=extra_info, offset=offset
    )
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
