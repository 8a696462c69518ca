"""NamesrvConfig: the name server's settings, by RocketMQ's namesrv.conf keys."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..config import setting
from ..java_config_keys import JAVA_NAMESRV_KEYS
from ..metrics.settings import MetricsSettings
from ..protocol.constants import DEFAULT_NAMESRV_PORT
from ..remoting.endpoint_settings import EndpointSettings


def _home(*parts: str) -> str:
    return str(Path.home().joinpath(*parts))


@dataclasses.dataclass
class NamesrvConfig(EndpointSettings, MetricsSettings):
    rocketmq_home: str = setting(
        os.environ.get("ROCKETMQ_HOME", ""), key="rocketmqHome", help="installation root"
    )
    acl_enable: bool = setting(
        False,
        help="refuse route and config changes not signed by an account of"
        " <rocketmqHome>/conf/plain_acl.yml (admin accounts for the admin requests)",
    )
    acl_file_watch_interval: int = setting(
        5000, minimum=1, help="ms between checks of the ACL files for changes (rocketmq-py's own)"
    )
    kv_config_path: str = setting(
        _home("namesrv", "kvConfig.json"), help="where KV config is persisted"
    )
    config_store_path: str = setting(
        _home("namesrv", "namesrv.properties"),
        help="where UPDATE_NAMESRV_CONFIG persists the configuration",
    )
    product_env_name: str = setting("center")
    cluster_test: bool = setting(False)
    order_message_enable: bool = setting(
        False, help="add orderTopicConf from the ORDER_TOPIC_CONFIG KV namespace to routes"
    )
    return_order_topic_config_to_broker: bool = setting(
        True, help="send the ORDER_TOPIC_CONFIG namespace back to registering brokers"
    )
    scan_not_active_broker_interval: int = setting(
        5000, help="ms between scans for brokers that stopped registering", minimum=1
    )
    broker_channel_expired_time: int = setting(
        120_000,
        help="ms without registration or heartbeat after which a broker is dropped",
        minimum=1,
    )
    enable_all_topic_list: bool = setting(True, help="answer GET_ALL_TOPIC_LIST_FROM_NAMESERVER")
    enable_topic_list: bool = setting(True, help="answer the unit and cluster topic lists")
    delete_topic_with_broker_registration: bool = setting(
        False, help="a topic missing from a master's new registration leaves that broker"
    )
    config_black_list: str = setting(
        "configBlackList;configStorePath;kvConfigPath",
        help="keys UPDATE_NAMESRV_CONFIG may not change, separated by ';'",
    )
    listen_port: int = setting(DEFAULT_NAMESRV_PORT, minimum=0, maximum=65535)
    bind_address: str = setting("0.0.0.0")
    transport: str = setting("tcp", help="the transport plugin to listen with")

    # thread-pool and Netty tuning of the Java server: meaningless here, so not reported
    ignored_keys = frozenset(
        {
            "serverWorkerThreads",
            "serverCallbackExecutorThreads",
            "serverSelectorThreads",
            "serverOnewaySemaphoreValue",
            "serverAsyncSemaphoreValue",
            "serverSocketSndBufSize",
            "serverSocketRcvBufSize",
            "serverPooledByteBufAllocatorEnable",
            "useEpollNativeSelector",
            "defaultThreadPoolNums",
            "clientRequestThreadPoolNums",
            "clientRequestThreadPoolQueueCapacity",
            "defaultThreadPoolQueueCapacity",
            "unRegisterBrokerQueueCapacity",
            "supportActingMaster",
            "needWaitForService",
            "waitSecondsForService",
            "notifyMinBrokerIdChanged",
        }
    )

    java_keys = JAVA_NAMESRV_KEYS

    def black_listed(self) -> set[str]:
        return {key.strip() for key in self.config_black_list.split(";") if key.strip()}
