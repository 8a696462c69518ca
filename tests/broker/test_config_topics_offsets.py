"""Broker settings, the topic table and consumer offsets: semantics and files."""

from __future__ import annotations

import anyio
import orjson
import pytest

from rocketmq_core.broker.config import BrokerConfig, delay_levels_ms
from rocketmq_core.broker.offsets import ConsumerOffsetManager
from rocketmq_core.broker.topics import TopicConfigManager
from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.constants import DEFAULT_TOPIC, SCHEDULE_TOPIC, Perm
from rocketmq_core.protocol.message import unpack_host
from rocketmq_core.protocol.topic_validation import send_forbidden, topic_problem

pytestmark = pytest.mark.anyio


def broker_config(tmp_path, **overrides) -> BrokerConfig:
    config = BrokerConfig(
        broker_name="broker-a", store_path_root_dir=str(tmp_path), namesrv_addr="127.0.0.1:9876"
    )
    for name, value in overrides.items():
        setattr(config, name, value)
    return config


# --- settings ----------------------------------------------------------------------------


def test_broker_conf_keys_map_to_the_store(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(
        "brokerClusterName = C1\nbrokerName=b1\nbrokerIP1=10.0.0.7\nlistenPort=10921\n"
        "flushDiskType=SYNC_FLUSH\nnamesrvAddr=10.0.0.1:9876;10.0.0.2:9876\n"
        f"storePathRootDir={tmp_path}/store\nfileReservedTime=48\ncheckCRCOnRecover=false\n"
        "commitLogHugeFolios=true\n"
    )
    config = BrokerConfig.load(path)
    config.validate()
    assert config.namesrv_addresses() == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert config.broker_addr == "10.0.0.7:10921"
    store = config.store_config()
    assert store.flush == "sync" and store.file_reserved_time == 48
    assert store.check_crc_on_recover is False
    assert store.commit_log_huge_folios is True
    assert unpack_host(store.store_host) == ("10.0.0.7", 10921)
    assert store.root_dir == f"{tmp_path}/store"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("flush_disk_type", "SOMETIMES", "flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH"),
        ("broker_role", "BOSS", "brokerRole must be"),
        ("broker_ip1", "broker.example", "brokerIP1 'broker.example' is not an IP address"),
        ("message_delay_level", "1s 5x", "messageDelayLevel item '5x'"),
        ("namesrv_addr", "localhost", "namesrvAddr entry 'localhost' is not host:port"),
    ],
)
def test_bad_settings_name_the_key(tmp_path, field, value, message):
    config = broker_config(tmp_path, **{field: value})
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_delay_levels():
    assert delay_levels_ms("1s 5s 1m 2h 1d") == [1000, 5000, 60_000, 7_200_000, 86_400_000]
    assert len(delay_levels_ms(BrokerConfig().message_delay_level)) == 18


# --- topics ------------------------------------------------------------------------------


def test_builtin_topics_and_auto_create_template(tmp_path):
    manager = TopicConfigManager(broker_config(tmp_path), str(tmp_path / "topics.json"))
    manager.load()
    assert manager.get(DEFAULT_TOPIC).perm == 7 and manager.get(DEFAULT_TOPIC).write_queue_nums == 8
    assert manager.get(SCHEDULE_TOPIC).read_queue_nums == 18
    assert manager.get("DefaultCluster").perm == 7 and manager.get("broker-a").perm == 7
    assert manager.data_version.counter == 1


def test_send_to_an_unknown_topic_creates_it_from_the_template(tmp_path):
    changes = []
    manager = TopicConfigManager(broker_config(tmp_path), str(tmp_path / "topics.json"))
    manager.load()
    manager.on_change(lambda: changes.append(manager.data_version.counter))
    created = manager.create_in_send("Fresh", DEFAULT_TOPIC, 4)
    assert (created.read_queue_nums, created.write_queue_nums, created.perm) == (4, 4, 6)
    assert manager.create_in_send("Fresh", DEFAULT_TOPIC, 16) is created  # exists now
    big = manager.create_in_send("Big", DEFAULT_TOPIC, 64)
    assert big.write_queue_nums == 8  # capped by the template's queues
    assert changes == [2, 3]
    assert manager.create_in_send("Other", "NoSuchTemplate", 4) is None


def test_auto_create_off_means_no_template(tmp_path):
    path = str(tmp_path / "topics.json")
    first = TopicConfigManager(broker_config(tmp_path), path)
    first.load()  # creates the built-ins, TBW102 among them
    anyio.run(first.persist)
    # restarted with auto-creation off: the stored TBW102 loses its INHERIT bit
    manager = TopicConfigManager(broker_config(tmp_path, auto_create_topic_enable=False), path)
    manager.load()
    assert not manager.get(DEFAULT_TOPIC).perm & Perm.INHERIT
    assert manager.create_in_send("Fresh", DEFAULT_TOPIC, 4) is None


async def test_topics_persist_atomically_with_a_backup(tmp_path):
    path = tmp_path / "config" / "topics.json"
    manager = TopicConfigManager(broker_config(tmp_path), str(path))
    manager.load()
    await manager.persist()
    manager.update(TopicConfig("Orders", 2, 2, 6))
    await manager.persist()
    saved = orjson.loads(path.read_bytes())
    assert saved["topicConfigTable"]["Orders"]["readQueueNums"] == 2
    assert saved["dataVersion"]["counter"] == manager.data_version.counter
    assert (
        "Orders"
        not in orjson.loads((tmp_path / "config" / "topics.json.bak").read_bytes())[
            "topicConfigTable"
        ]
    )
    path.write_bytes(b"")  # an empty file (a crash of an older writer): the .bak is read
    again = TopicConfigManager(broker_config(tmp_path), str(path))
    again.load()
    assert again.get(DEFAULT_TOPIC) is not None and again.get("Orders") is None


def test_corrupt_topic_file_is_a_clear_error(tmp_path):
    path = tmp_path / "topics.json"
    path.write_text("{not json")
    manager = TopicConfigManager(broker_config(tmp_path), str(path))
    with pytest.raises(ConfigError, match="is not a topic table"):
        manager.load()


@pytest.mark.parametrize(
    ("topic", "problem"),
    [
        ("", "The specified topic is blank."),
        ("a b", "contains illegal characters"),
        ("x" * 128, "longer than topic max length 127"),
        ("%RETRY%" + "g" * 200, None),
        ("Topic_Test-1|%", None),
    ],
)
def test_topic_names(topic, problem):
    found = topic_problem(topic)
    assert (found is None) if problem is None else (problem in found)


def test_system_topics_are_not_sendable():
    assert send_forbidden(SCHEDULE_TOPIC) and not send_forbidden("TopicTest")


# --- offsets -----------------------------------------------------------------------------


async def test_offsets_commit_query_and_java_file_shape(tmp_path):
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsetManager(str(path))
    assert offsets.query("G", "T", 0) == -1
    offsets.commit("G", "T", 0, 250)
    offsets.commit("G", "T", 1, 249)
    offsets.commit("G2", "T", 0, 3)
    await offsets.persist()
    assert path.read_bytes() == b'{"offsetTable":{"T@G":{0:250,1:249},"T@G2":{0:3}}}'
    reloaded = ConsumerOffsetManager(str(path))
    reloaded.load()
    assert reloaded.query("G", "T", 1) == 249
    assert reloaded.groups_of("T") == ["G", "G2"] and reloaded.topics_of("G") == ["T"]
    reloaded.remove_group("G")
    assert reloaded.offsets("G", "T") == {}


def test_offsets_read_a_java_pretty_printed_file(tmp_path):
    path = tmp_path / "consumerOffset.json"
    path.write_text('{\n\t"offsetTable":{\n\t\t"TopicTest@GroupA":{0:250,1:249}\n\t}\n}')
    offsets = ConsumerOffsetManager(str(path))
    offsets.load()
    assert offsets.offsets("GroupA", "TopicTest") == {0: 250, 1: 249}


@pytest.mark.anyio
async def test_subscription_groups_persist_and_read_java_files(tmp_path):
    from rocketmq_core.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager

    path = tmp_path / "subscriptionGroup.json"
    # as a Java 5 broker writes it: fields we do not use are ignored, not refused
    path.write_text(
        '{"subscriptionGroupTable":{"G":{"groupName":"G","retryMaxTimes":5,'
        '"retryQueueNums":2,"consumeEnable":false,"groupRetryPolicy":{"type":"CUSTOMIZED"},'
        '"attributes":{}}},"forbiddenTable":{},"dataVersion":{"counter":7,"timestamp":1}}'
    )
    manager = SubscriptionGroupManager(str(path))
    manager.load()
    assert manager.table["G"] == SubscriptionGroupConfig(
        "G", consume_enable=False, retry_queue_nums=2, retry_max_times=5
    )
    assert manager.find("Fresh") == SubscriptionGroupConfig("Fresh")  # auto-created
    await manager.persist()
    again = SubscriptionGroupManager(str(path), auto_create=False)
    again.load()
    assert again.table == manager.table
    assert again.data_version.counter == 8
    assert again.find("Unknown") is None


def test_a_broken_subscription_group_file_says_what_to_do(tmp_path):
    from rocketmq_core.broker.groups import SubscriptionGroupManager

    path = tmp_path / "subscriptionGroup.json"
    path.write_text('{"subscriptionGroupTable":{"G":{"retryMaxTimes":5}}}')
    with pytest.raises(ConfigError, match=r"not a subscription group table.*restore"):
        SubscriptionGroupManager(str(path)).load()
