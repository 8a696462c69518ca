"""Broker statistics (METRICS.md §2, §3): the moving rates from a clock the test sets,
then the counts, sizes and runtime-info keys of a real broker after sends and pulls."""

from __future__ import annotations

import json
import re
import time

import pytest

from rocketmq_core.broker.processors.admin import human_bytes
from rocketmq_core.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStats,
    java_double,
)
from rocketmq_core.cli import main
from rocketmq_core.cli.cluster import first_tps
from rocketmq_core.protocol.bodies import BrokerStatsData, ConsumeStatsList, KVTable
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_core.protocol.message import BatchItem, encode_batch, iter_records, record_size
from rocketmq_core.store.api import GetResult, GetStatus, MessageToStore, PutResult, PutStatus

from .wire import pull_request, send_request

R = RequestCode
T0 = 1_700_000_000_000  # ms
OK = PutResult(PutStatus.PUT_OK)


def message(topic="T", body=b"x" * 100, properties=b"TAGS\x01a\x02") -> MessageToStore:
    return MessageToStore(topic, 0, body, properties)


def found(*records: bytes) -> GetResult:
    return GetResult(GetStatus.FOUND, 0, 0, 0, list(records))


# --- the moving rates, on a clock the test sets -------------------------------------------


def test_the_minute_window_is_seeded_with_nothing_one_interval_before_the_first_sample():
    stats = BrokerStats("C")
    for _ in range(30):
        stats.count_put(message(), OK)
    assert stats.data(TOPIC_PUT_NUMS, "T") is None  # not sampled yet: "not exist"
    stats.tick(T0)
    minute = stats.data(TOPIC_PUT_NUMS, "T").stats_minute
    # 30 messages since "0 at T0 - 10 s": 3 a second, one message per call
    assert (minute.sum, minute.tps, minute.avgpt) == (30, 3.0, 1.0)


def test_minute_rates_move_over_seven_ten_second_samples():
    stats = BrokerStats("C")
    stats.tick(T0)
    for second in range(1, 121):
        stats.count_put_batch([message()] * 2, OK)  # 2 messages a call, 1 call a second
        stats.tick(T0 + second * 1000)
    minute = stats.data(TOPIC_PUT_NUMS, "T").stats_minute
    # the last 7 samples span 60 s, in which 120 messages came in 60 calls
    assert (minute.sum, minute.tps, minute.avgpt) == (120, 2.0, 2.0)
    for second in range(121, 181):  # a quiet minute
        stats.tick(T0 + second * 1000)
    minute = stats.data(TOPIC_PUT_NUMS, "T").stats_minute
    assert (minute.sum, minute.tps, minute.avgpt) == (0, 0.0, 0.0)
    assert stats.value(TOPIC_PUT_NUMS, "T") == 240


def test_hour_and_day_windows_sample_every_ten_minutes_and_every_hour():
    stats = BrokerStats("C")
    stats.tick(T0)  # every window samples at the first tick
    for minute in range(1, 121):
        for _ in range(6):
            stats.count_get("G", "T", found(b"a" * 10, b"b" * 10))
        stats.tick(T0 + minute * 60_000)
    data = stats.data(GROUP_GET_NUMS, "T@G")
    # 12 messages a minute: the hour window holds the last 60 min; the day window, first
    # sampled at T0 + 1 h (seeded with 0 at T0), the whole 2 h
    assert (data.stats_hour.sum, data.stats_hour.tps) == (720, 0.2)
    assert (data.stats_day.sum, data.stats_day.tps, data.stats_day.avgpt) == (1440, 0.2, 2.0)
    assert stats.data(GROUP_GET_SIZE, "T@G").stats_hour.avgpt == 20.0  # bytes per pull


def test_broker_totals_count_values_only_so_their_avgpt_is_zero():
    stats = BrokerStats("DefaultCluster")
    stats.count_put_batch([message()] * 3, OK)
    stats.count_get("G", "T", found(b"a", b"b"))
    stats.count_get("G", "T", GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0))
    stats.tick(T0)
    puts = stats.data(BROKER_PUT_NUMS, "DefaultCluster").stats_minute
    gets = stats.data(BROKER_GET_NUMS, "DefaultCluster").stats_minute
    assert (puts.sum, puts.avgpt, gets.sum, gets.avgpt) == (3, 0.0, 2, 0.0)


@pytest.mark.parametrize("store_v6", [False, True])
@pytest.mark.parametrize("born_v6", [False, True])
@pytest.mark.parametrize("topic", ["T", "T" * 128])  # a topic length of 1 and of 2 bytes
def test_a_put_counts_the_bytes_of_its_record(store_v6, born_v6, topic):
    stats = BrokerStats("C")
    stats.store_host_v6 = store_v6
    assert stats.store_host_v6 is store_v6
    sent = MessageToStore(
        topic, 0, b"x" * 100, b"TAGS\x01a\x02", born_host=bytes(20 if born_v6 else 8)
    )
    expected = record_size(100, len(topic), len(sent.properties), born_v6, store_v6)
    stats.count_put(sent, OK)
    stats.count_put_batch([sent, sent], OK)
    assert stats.puts[topic] == [3, 2, 3 * expected]
    assert stats.stored_bytes == 3 * expected


def test_a_refused_put_counts_as_a_failure_only():
    stats = BrokerStats("C")
    stats.count_put(message(), PutResult.refused(PutStatus.MESSAGE_ILLEGAL, "too big"))
    assert stats.puts == {} and stats.put_failures == 1
    assert stats.runtime_info()["putMessageTimesTotal"] == "1"  # never below 1, as Java


def test_store_rates_fill_in_as_one_second_samples_come():
    stats = BrokerStats("C")
    stats.tick(T0)
    info = stats.runtime_info()
    assert info["putTps"] == "  "  # no part has enough samples yet
    assert info["getTotalTps"] == "0.0 0.0 0.0"  # always three numbers
    for second in range(1, 11):
        for _ in range(5):
            stats.count_put(message(), OK)
        stats.count_get("G", "T", found(b"a", b"b", b"c"))
        stats.count_get("G", "T", GetResult(GetStatus.OFFSET_FOUND_NULL, 0, 0, 0))
        stats.tick(T0 + second * 1000)
    info = stats.runtime_info()
    assert info["putTps"] == "5.0  "
    assert info["getFoundTps"] == "1.0  " and info["getMissTps"] == "1.0  "
    assert info["getTotalTps"] == "2.0 0.0 0.0"
    assert info["getTransferedTps"] == info["getTransferredTps"] == "3.0  "
    for second in range(11, 601):
        stats.tick(T0 + second * 1000)
    assert stats.runtime_info()["putTps"] == "0.0 0.0 0.08333333333333333"
    assert info["msgPutTotalTodayNow"] == "50" and info["msgGetTotalTodayNow"] == "30"


def test_the_totals_at_local_midnight_become_this_morning_and_then_yesterday():
    stats = BrokerStats("C")
    noon = [int(time.mktime((2024, 3, day, 12, 0, 0, 0, 0, -1)) * 1000) for day in (1, 2, 3)]
    stats.tick(noon[0])
    stats.count_put(message(), OK)
    stats.count_get("G", "T", found(b"a"))
    stats.tick(noon[0] + 1000)
    info = stats.runtime_info()
    assert (info["msgPutTotalTodayMorning"], info["msgPutTotalYesterdayMorning"]) == ("0", "0")
    stats.tick(noon[1])
    stats.count_put(message(), OK)
    stats.tick(noon[2])
    info = stats.runtime_info()
    assert (info["msgPutTotalTodayMorning"], info["msgPutTotalYesterdayMorning"]) == ("2", "1")
    assert (info["msgGetTotalTodayMorning"], info["msgGetTotalYesterdayMorning"]) == ("1", "1")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (12.5, "12.5"),
        (1 / 3, "0.3333333333333333"),
        (1e-4, "1.0E-4"),
        (0.00123, "0.00123"),
        (1.5e7, "1.5E7"),
        (123456789.0, "1.23456789E8"),
    ],
)
def test_doubles_are_written_as_java_writes_them(value, text):
    assert java_double(value) == text


def test_byte_counts_are_written_as_java_writes_them():
    assert [human_bytes(n) for n in (0, 1023, 1536 * 1024, 49 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.5 MiB",
        "49.0 GiB",
    ]


# --- a real broker ------------------------------------------------------------------------


async def call(client, broker, code, fields=None, body=b""):
    return await client.invoke(broker.address, RemotingCommand.request(code, fields or {}, body))


async def view(client, broker, name, key):
    return await call(
        client, broker, R.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
    )


# what rocketmq-exporter needs to export a broker's runtime gauges (METRICS.md §4)
EXPORTER_KEYS = {
    *(f"msg{d}Total{w}" for d in ("Put", "Get") for w in ("TodayNow", "TodayMorning")),
    "msgPutTotalYesterdayMorning",
    "msgGetTotalYesterdayMorning",
    *("putTps", "getMissTps", "getTotalTps", "getFoundTps", "getTransferedTps"),
    *("commitLogDirCapacity", "remainHowManyDataToFlush", "bootTimestamp", "runtime"),
    *(f"{p}ThreadPoolQueue{k}" for p in ("send", "pull", "query") for k in ("Size", "Capacity")),
    *(f"{p}ThreadPoolQueueHeadWaitTimeMills" for p in ("send", "pull", "query")),
    *("brokerVersion", "brokerVersionDesc", "consumeQueueDiskRatio", "commitLogDiskRatio"),
    *("pageCacheLockTimeMills", "commitLogMinOffset", "commitLogMaxOffset", "dispatchMaxBuffer"),
    *("getMessageEntireTimeMax", "putMessageTimesTotal", "putMessageEntireTimeMax"),
    *("putMessageAverageSize", "putMessageSizeTotal", "startAcceptSendRequestTimeStamp"),
    *("earliestMessageTimeStamp", "remainTransientStoreBufferNumbs", "dispatchBehindBytes"),
    "putMessageDistributeTime",
}


@pytest.mark.anyio
async def test_sends_and_pulls_are_counted_with_their_stored_sizes(broker, client):
    for _ in range(3):
        assert (await client.invoke(broker.address, send_request(body=b"m" * 50))).code == 0
    batch = encode_batch([BatchItem(0, b"b" * 20, b"")] * 4)
    assert (await client.invoke(broker.address, send_request(body=batch, batch=True))).code == 0
    first = await client.invoke(broker.address, pull_request(offset=0))
    missed = await client.invoke(broker.address, pull_request(offset=7, suspend=0, sys_flag=0x4))
    assert (first.code, missed.code) == (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)
    pulled = list(iter_records(first.body))
    assert len(pulled) == 7

    stats = broker.stats
    stored = broker.store.max_commit_log_offset - broker.store.min_commit_log_offset
    assert stats.value(TOPIC_PUT_NUMS, "Orders") == 7
    assert stats.value(TOPIC_PUT_SIZE, "Orders") == stored  # the bytes the store wrote
    assert stats.puts["Orders"][1] == 4  # calls: 3 sends and a batch
    assert stats.value(GROUP_GET_NUMS, "Orders@CG") == 7
    assert stats.value(GROUP_GET_SIZE, "Orders@CG") == len(first.body)
    assert (stats.gets_found, stats.gets_missed) == (1, 1)
    assert stats.value(BROKER_PUT_NUMS, broker.config.broker_cluster_name) == 7

    info = KVTable.decode((await call(client, broker, R.GET_BROKER_RUNTIME_INFO)).body).table
    assert info.keys() >= EXPORTER_KEYS
    assert (info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"]) == ("7", "7")
    assert (info["putMessageTimesTotal"], info["putMessageSizeTotal"]) == ("7", str(stored))
    assert float(info["putMessageAverageSize"]) == stored / 7
    assert len(info["getTotalTps"].split(" ")) == 3
    assert all(float(tps) >= 0 for tps in info["getTotalTps"].split(" "))
    assert re.fullmatch(
        r"Total : [\d.]+ [KMGTPE]iB, Free : [\d.]+ [KMGTPE]?i?B\.", info["commitLogDirCapacity"]
    )
    assert 0 < float(info["commitLogDiskRatio"]) < 1
    assert len(re.findall(r"\[[^]]+\]:\d+ ", info["putMessageDistributeTime"])) == 13
    assert 0 < int(info["earliestMessageTimeStamp"]) <= int(time.time() * 1000)
    assert info["remainHowManyDataToFlush"].endswith("B")


@pytest.mark.anyio
async def test_view_broker_stats_data_answers_for_sampled_items(broker, client):
    for _ in range(5):
        await client.invoke(broker.address, send_request())
    await client.invoke(broker.address, pull_request())
    missing = await view(client, broker, TOPIC_PUT_NUMS, "Orders")
    # no sample yet (they come each 10 s): the item does not exist, as in Java
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark == "The stats <TOPIC_PUT_NUMS> <Orders> not exist"
    broker.stats.tick(int(time.time() * 1000) + 10_000)  # the next minute sample, now
    data = BrokerStatsData.decode((await view(client, broker, TOPIC_PUT_NUMS, "Orders")).body)
    assert (data.stats_minute.sum, data.stats_minute.avgpt) == (5, 1.0)
    assert data.stats_minute.tps == pytest.approx(0.5, rel=0.1)  # 5 since 0 about 10 s ago
    got = BrokerStatsData.decode((await view(client, broker, GROUP_GET_NUMS, "Orders@CG")).body)
    assert got.stats_minute.sum == 5 and got.stats_minute.avgpt == 5.0
    cluster = broker.config.broker_cluster_name
    total = BrokerStatsData.decode((await view(client, broker, BROKER_PUT_NUMS, cluster)).body)
    assert (total.stats_minute.sum, total.stats_minute.avgpt) == (5, 0.0)
    unknown = await view(client, broker, "NO_SUCH_STATS", "Orders")
    assert unknown.remark == "The stats <NO_SUCH_STATS> <Orders> not exist"


@pytest.mark.anyio
async def test_send_backs_are_counted_under_the_group_and_first_topic(broker, client):
    sent = await client.invoke(broker.address, send_request())
    pulled = await client.invoke(broker.address, pull_request())
    (record,) = iter_records(pulled.body)
    back = ConsumerSendMsgBackRequestHeader(
        offset=record.commit_log_offset, group="CG", delay_level=0
    )
    answer = await call(client, broker, R.CONSUMER_SEND_MSG_BACK, back.to_ext_fields())
    assert (sent.code, answer.code) == (0, 0)
    assert broker.stats.value(SNDBCK_PUT_NUMS, "Orders@CG") == 1
    assert broker.stats.stored_messages == 2  # the retry message is a store put too


@pytest.mark.anyio
async def test_broker_consume_stats_lists_each_group_and_its_lag(broker, client):
    for _ in range(4):
        await client.invoke(broker.address, send_request())
    await client.invoke(broker.address, pull_request())
    commit = UpdateConsumerOffsetRequestHeader(
        consumer_group="CG", topic="Orders", queue_id=0, commit_offset=1
    )
    await call(client, broker, R.UPDATE_CONSUMER_OFFSET, commit.to_ext_fields())
    broker.stats.tick(int(time.time() * 1000) + 10_000)
    answer = await call(client, broker, R.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    body = ConsumeStatsList.decode(answer.body)
    assert body.broker_addr == broker.config.broker_addr
    by_group = {group: stats for entry in body.consume_stats_list for group, stats in entry.items()}
    (orders,) = by_group["CG"]
    assert orders.total_diff == 3 and body.total_diff == 3
    assert orders.consume_tps == pytest.approx(0.4, rel=0.1)  # 4 pulled in about 10 s
    ordered = await call(client, broker, R.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    assert ConsumeStatsList.decode(ordered.body).total_diff == 0  # Orders is no order topic
    refused = await call(client, broker, R.GET_BROKER_CONSUME_STATS)
    assert refused.code != ResponseCode.SUCCESS and "isOrder" in refused.remark


# --- the command line ---------------------------------------------------------------------


def test_first_tps_is_the_ten_second_part_as_mqadmin_prints_it():
    assert [first_tps(v) for v in ("12.5 11.9 10.0", "3.0  ", "  ", None, "x")] == [
        *("12.50", "3.00", "0.00", "-", "-"),
    ]


def test_cluster_list_and_status_show_the_broker_rates(rocketmq_cluster, capsys):
    namesrv = ["-n", rocketmq_cluster.namesrv_address]
    rocketmq_cluster.create_topic("Stats", queues=1)
    assert main(["send", "-t", "Stats", "--body", "m", "--count", "6", *namesrv]) == 0
    consume = ["consume", "-t", "Stats", "--group", "SG", "--from", "first", "--count", "6"]
    assert main([*consume, *namesrv]) == 0
    capsys.readouterr()
    assert main(["cluster", "list", *namesrv]) == 0
    header, row = (
        re.split(r"\s{2,}", line.strip()) for line in capsys.readouterr().out.splitlines()
    )
    assert header[8:10] == ["IN TPS", "OUT TPS"]
    assert all(re.fullmatch(r"\d+\.\d\d", cell) for cell in row[8:10])
    assert row[10] == "6"  # PUT TODAY: msgPutTotalTodayNow
    address = rocketmq_cluster.broker_address
    assert main(["cluster", "status", "-b", address, *namesrv, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)[address]
    assert (info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"]) == ("6", "6")
    assert info.keys() >= EXPORTER_KEYS


@pytest.mark.parametrize("store_v6", [False, True])
def test_a_batch_counts_the_bytes_of_each_of_its_records(store_v6):
    stats = BrokerStats("C")
    stats.store_host_v6 = store_v6
    batch = [
        MessageToStore("Orders", 0, b"x" * size, b"KEYS\x01k\x02" * keys)
        for size, keys in ((0, 0), (10, 1), (1000, 3))
    ]
    stats.count_put_batch(batch, OK)
    assert stats.stored_bytes == sum(map(stats.stored_size, batch))
    assert stats.puts["Orders"] == [3, 1, stats.stored_bytes]
