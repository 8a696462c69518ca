"""BrokerConfig: the broker's settings, by RocketMQ's broker.conf keys (STORE.md §17.1)."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ..acl.signing import Credentials
from ..config import setting
from ..errors import ConfigError
from ..java_config_keys import JAVA_BROKER_KEYS
from ..metrics.settings import MetricsSettings
from ..protocol.constants import PERM_RW
from ..protocol.message import pack_host
from ..remoting.endpoint_settings import EndpointSettings
from ..remoting.transport import parse_endpoint
from ..store.api import StoreConfig

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
MAX_TIMER_DELAY_SEC = 10 * 365 * 86_400
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

# refused by UPDATE_BROKER_CONFIG whatever configBlackList says, as RocketMQ does
ALWAYS_BLACK_LISTED = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})
# the keys UPDATE_BROKER_CONFIG applies to the running broker, each with what reads it;
# every other key is read at startup only and refused (docs/operations.md lists both)
LIVE_KEYS = frozenset(
    {
        "maxMessageSize",  # the send size check, and the store's
        "brokerPermission",  # sends and pulls refused; registered again at once
        "diskMaxUsedSpaceRatio",  # the store's disk checks, re-run at once
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "longPollingEnable",  # how long a pull on an empty queue is held
        "shortPollingTimeMills",
        "autoCreateSubscriptionGroup",  # pulls by a group nobody created
        "regionId",  # the send answer's MSG_REGION and TRACE_ON
        "traceOn",
        "rejectTransactionMessage",  # transactional (half) messages refused
        "maxBatchMessageCount",  # read by the send path per batch
        "maxTopicQueueNums",  # read by UPDATE_AND_CREATE_TOPIC per request
    }
)


_GAP_ALIAS = "haMaxGapNotInSync"  # 5.x's name for haSlaveFallbehindMax


def _default_broker_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


@dataclasses.dataclass
class BrokerConfig(EndpointSettings, MetricsSettings):
    broker_cluster_name: str = setting("DefaultCluster")
    broker_name: str = setting(_default_broker_name())
    broker_id: int = setting(0, help="0 for a master, 1 and up for its slaves", minimum=0)
    broker_ip1: str = setting("127.0.0.1", key="brokerIP1", help="address clients are given")
    broker_ip2: str = setting("", key="brokerIP2", help="HA address (default brokerIP1)")
    listen_port: int = setting(10911)
    ha_listen_port: int = setting(
        0,
        minimum=0,
        maximum=65535,
        help="the replication (HA) port; 0: listenPort + 1 (any free port when listenPort is 0)",
    )
    ha_master_address: str = setting(
        "", help="a slave's master HA address host:port; empty: learned from the name server"
    )
    fast_listen_port: int = setting(
        0,
        minimum=0,
        maximum=65535,
        help="the VIP port, serving what listenPort serves; 0: listenPort - 2 (any free port"
        " when listenPort is 0)",
    )
    grpc_server_port: int = setting(
        -1,
        minimum=-1,
        maximum=65535,
        help="the 5.x clients' gRPC port (plugin proxy_grpc; `rocketmq broker` and"
        " `standalone` default to 8081); -1: off, 0: any free port",
    )
    slave_sync_delay: int = setting(
        3000,
        minimum=0,
        help="ms from a slave's start to its first copy of its master's topics, groups and"
        " offsets (rocketmq-py's own: Java's is fixed)",
    )
    slave_sync_interval: int = setting(
        10_000,
        minimum=1,
        help="ms between a slave's copies of its master's topics, groups and offsets"
        " (rocketmq-py's own: Java's is fixed)",
    )
    ha_send_heartbeat_interval: int = setting(
        5000, minimum=1, help="ms between a slave's offset reports when idle"
    )
    ha_housekeeping_interval: int = setting(
        20_000, minimum=1, help="ms a replication connection may stay silent before it is closed"
    )
    ha_transfer_batch_size: int = setting(
        32_768,
        minimum=1,
        maximum=4 * 1024 * 1024 - 12,
        help="the most CommitLog bytes a master sends a slave in one frame",
    )
    ha_slave_fallbehind_max: int = setting(
        268_435_456,
        minimum=0,
        help="SYNC_MASTER: a slave further behind (bytes) counts as unavailable"
        " (5.x: haMaxGapNotInSync)",
    )
    slave_timeout: int = setting(
        3000, minimum=1, help="ms a SYNC_MASTER send waits for a slave's ack"
    )
    slave_read_enable: bool = setting(
        False, help="a master may send far-behind consumers to read from a slave"
    )
    access_message_in_memory_max_ratio: int = setting(
        40, minimum=0, maximum=100, help="percent of RAM a consumer's lag may span on a master"
    )
    total_physical_memory: int = setting(
        0,
        minimum=0,
        help="bytes of RAM the slave-read suggestion counts (a container's limit);"
        " 0: the machine's",
    )
    offset_check_in_slave: bool = setting(
        False, help="a slave answers PULL_OFFSET_MOVED itself instead of retry-at-master"
    )
    namesrv_addr: str = setting(
        os.environ.get("NAMESRV_ADDR", ""),
        help="name servers, host:port;host:port (quic://host:port for QUIC)",
    )
    store_path_root_dir: str = setting(str(Path.home() / "store"))
    store_path_commit_log: str = setting("", help="default <storePathRootDir>/commitlog")
    mapped_file_size_commit_log: int = setting(1024 * 1024 * 1024, minimum=1)
    mapped_file_size_consume_queue: int = setting(6_000_000, minimum=20)
    max_mapped_consume_queue_files: int = setting(
        16_384,
        minimum=1,
        help="consume-queue files kept mapped at once (the least recently used idle ones"
        " are unmapped); at most half of vm.max_map_count",
    )
    commit_log_huge_folios: bool = setting(
        False,
        help="fault the CommitLog in by 2 MiB folios (ASYNC_FLUSH, ext4 on Linux 6.16+):"
        " cheaper per page where memory is the machine's own; on a VM that hands free"
        " memory back to its host each folio can stall a write for ms (docs/perf.md)",
    )
    commit_log_page_cache_window: int = setting(
        0,
        minimum=0,
        help="bytes of flushed CommitLog kept in the page cache behind the flush; older"
        " pages are dropped, and new ones reuse their memory (a VM that hands free memory"
        " back to its host makes fresh memory dear); 0: the kernel decides (docs/perf.md)",
    )
    broker_role: str = setting("ASYNC_MASTER", help="ASYNC_MASTER, SYNC_MASTER or SLAVE")
    flush_disk_type: str = setting("ASYNC_FLUSH", help="ASYNC_FLUSH or SYNC_FLUSH")
    sync_flush_timeout: int = setting(5000, minimum=1)
    flush_interval_commit_log: int = setting(500, minimum=1)
    flush_commit_log_least_pages: int = setting(4, minimum=0)
    flush_commit_log_thorough_interval: int = setting(10_000, minimum=0)
    delete_when: str = setting("04")
    file_reserved_time: float = setting(72.0, help="hours", minimum=0)
    disk_max_used_space_ratio: int = setting(75, minimum=0, maximum=100)
    disk_space_warning_level_ratio: int = setting(90, minimum=0, maximum=100)
    disk_space_clean_forcibly_ratio: int = setting(85, minimum=0, maximum=100)
    max_message_size: int = setting(4 * 1024 * 1024, minimum=1)
    max_batch_message_count: int = setting(
        10_000,
        minimum=1,
        help="messages one SEND_BATCH_MESSAGE may hold (rocketmq-py's own; Java bounds a"
        " batch by maxMessageSize alone, which lets through ~180,000 one-byte records)",
    )
    max_topic_queue_nums: int = setting(
        1024,
        minimum=1,
        help="the most read or write queues UPDATE_AND_CREATE_TOPIC may give a topic"
        " (rocketmq-py's own: Java takes any count, and admin requests then walk them all)",
    )
    message_delay_level: str = setting(DEFAULT_DELAY_LEVELS)
    timer_wheel_enable: bool = setting(True, help="accept timer (arbitrary-time) messages")
    timer_max_delay_sec: int = setting(
        40 * 86_400, help="the furthest ahead a timer message may ask to be delivered"
    )
    timer_precision_ms: int = setting(
        100, help="timer messages are delivered at their time, at most this much later"
    )
    auto_create_topic_enable: bool = setting(True)
    auto_create_subscription_group: bool = setting(True)
    default_topic_queue_nums: int = setting(8, minimum=1)
    broker_permission: int = setting(int(PERM_RW), minimum=0)
    cluster_topic_enable: bool = setting(True)
    broker_topic_enable: bool = setting(True)
    trace_topic_enable: bool = setting(False)
    msg_trace_topic_name: str = setting("RMQ_SYS_TRACE_TOPIC")
    long_polling_enable: bool = setting(True)
    short_polling_time_mills: int = setting(1000, minimum=0)
    message_index_enable: bool = setting(True)
    max_hash_slot_num: int = setting(5_000_000, minimum=1)
    max_index_num: int = setting(20_000_000, minimum=1)
    check_crc_on_recover: bool = setting(True, key="checkCRCOnRecover")
    reject_transaction_message: bool = setting(False)
    transaction_time_out: int = setting(6000, minimum=0)
    transaction_check_max: int = setting(15, minimum=0)
    transaction_check_interval: int = setting(30_000, minimum=1)
    # POP (docs/spec/POP.md)
    revive_queue_num: int = setting(8, minimum=1, help="queues of rmq_sys_REVIVE_LOG_<cluster>")
    enable_retry_topic_v2: bool = setting(False, help="POP retry topic %RETRY%group+topic")
    pop_from_retry_probability: int = setting(20, minimum=0, maximum=100)
    register_name_server_period: int = setting(30_000, minimum=0)
    register_broker_timeout_mills: int = setting(24_000, minimum=1)
    force_register: bool = setting(True)
    compressed_register: bool = setting(False)
    flush_consumer_offset_interval: int = setting(5000, minimum=0)
    flush_delay_offset_interval: int = setting(10_000, minimum=0)
    region_id: str = setting("DefaultRegion")
    trace_on: bool = setting(True)
    channel_expired_timeout: int = setting(120_000, minimum=1)
    broker_config_path: str = setting(
        "", help="where UPDATE_BROKER_CONFIG persists the configuration; empty: not persisted"
    )
    config_black_list: str = setting(
        "configBlackList;brokerConfigPath",
        help="keys UPDATE_BROKER_CONFIG may not change, separated by ';'",
    )
    acl_enable: bool = setting(
        False, help="check every request against the accounts of <rocketmqHome>/conf/plain_acl.yml"
    )
    rocketmq_home: str = setting(
        os.environ.get("ROCKETMQ_HOME", ""),
        key="rocketmqHome",
        help="where conf/plain_acl.yml is read (aclEnable); empty: the user's home",
    )
    acl_file_watch_interval: int = setting(
        5000, minimum=1, help="ms between checks of the ACL files for changes (rocketmq-py's own)"
    )
    store: str = setting("mmap", help="the store plugin")
    inner_client_authentication_credentials: str = setting(
        "",
        help='JSON {"accessKey": "...", "secretKey": "..."}: the broker signs its requests to'
        " name servers and other brokers with this ACL account (RocketMQ 5.3's key)",
        secret=True,
    )
    transport: str = setting("tcp", help="the transport plugin")

    ignored_keys = frozenset(
        {
            "sendMessageThreadPoolNums",
            "pullMessageThreadPoolNums",
            "useReentrantLockWhenPutMessage",
            "transientStorePoolEnable",
            "warmMapedFileEnable",
            "osPageCacheBusyTimeOutMills",
            "serverWorkerThreads",
            "serverSelectorThreads",
            "clientWorkerThreads",
            "enablePropertyFilter",
            "useServerSideResetOffset",
            "enableSlaveActingMaster",
            "enableControllerMode",
        }
    )

    java_keys = JAVA_BROKER_KEYS

    def startup_only_keys(self) -> set[str]:
        """Keys UPDATE_BROKER_CONFIG refuses because only a restart applies them."""
        known = set(self.fields_by_key()) | self.ignored_keys
        return known - LIVE_KEYS - self.black_listed()

    def black_listed(self) -> set[str]:
        """Keys UPDATE_BROKER_CONFIG refuses: RocketMQ's fixed ones and configBlackList."""
        configured = {key.strip() for key in self.config_black_list.split(";") if key.strip()}
        return configured | ALWAYS_BLACK_LISTED

    def validate(self) -> None:
        """ConfigError naming the key when a value cannot work."""
        super().validate()
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ConfigError(
                f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}"
            )
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ConfigError(
                f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {self.broker_role!r}"
            )
        if self.broker_role == "SLAVE" and self.broker_id == 0:
            raise ConfigError(
                "brokerRole is SLAVE but brokerId is 0 (the master's id): set brokerId=1"
                " (or more), or brokerRole=ASYNC_MASTER"
            )
        if self.broker_role != "SLAVE" and self.broker_id != 0:
            raise ConfigError(
                f"brokerRole is {self.broker_role} but brokerId is {self.broker_id}: a master"
                " has brokerId=0; set brokerRole=SLAVE for a slave"
            )
        if not 0 <= self.listen_port < 65536:  # 0: any free port (tests)
            raise ConfigError(f"listenPort must be a port number, not {self.listen_port}")
        if 0 < self.listen_port <= 2 and not self.fast_listen_port:
            raise ConfigError(
                f"listenPort {self.listen_port} leaves no VIP port (listenPort - 2):"
                " set listenPort above 2, or fastListenPort"
            )
        delay_levels_ms(self.message_delay_level)
        if not 0 < self.timer_max_delay_sec <= MAX_TIMER_DELAY_SEC:
            raise ConfigError(
                f"timerMaxDelaySec must be between 1 and {MAX_TIMER_DELAY_SEC} (10 years),"
                f" not {self.timer_max_delay_sec}"
            )
        if not 1 <= self.timer_precision_ms <= 60_000:
            raise ConfigError(
                f"timerPrecisionMs must be between 1 and 60000, not {self.timer_precision_ms}"
            )
        self.store_config()  # brokerIP1 must be an IP address
        self.inner_client_credentials()
        self.metrics_plan(self.broker_ip1)
        for address in self.namesrv_addresses():
            try:
                parse_endpoint(address)
            except ConfigError:
                raise ConfigError(
                    f"namesrvAddr entry {address!r} is not host:port (or quic://host:port)"
                ) from None
        self.validate_endpoints()

    def update(self, values: Mapping[str, str], **options: Any) -> list[str]:
        """As Settings.update; 5.x's haMaxGapNotInSync is read as haSlaveFallbehindMax."""
        if _GAP_ALIAS in values:
            values = dict(values)
            gap = values.pop(_GAP_ALIAS)
            values.setdefault("haSlaveFallbehindMax", gap)
        return super().update(values, **options)

    def inner_client_credentials(self) -> Credentials | None:
        """What the broker signs its own requests with (innerClientAuthenticationCredentials),
        None when unset; ConfigError when it is not JSON with both keys."""
        text = self.inner_client_authentication_credentials.strip()
        if not text:
            return None
        shape = (
            'innerClientAuthenticationCredentials must be JSON {"accessKey": "...",'
            ' "secretKey": "..."}'
        )
        try:
            keys = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise ConfigError(f"{shape}; it is not JSON") from None
        if not isinstance(keys, dict):
            raise ConfigError(f"{shape}, not a JSON {type(keys).__name__}")
        for name in ("accessKey", "secretKey"):
            if not isinstance(keys.get(name), str) or not keys[name]:
                raise ConfigError(f"{shape}; its {name} is missing or empty")
        return Credentials(
            keys["accessKey"], keys["secretKey"], str(keys.get("securityToken") or "")
        )

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def replicates(self) -> bool:
        """The role needs the store's replication: a slave, or a master that waits for one."""
        return self.broker_role in ("SLAVE", "SYNC_MASTER")

    def namesrv_addresses(self) -> list[str]:
        return [part.strip() for part in self.namesrv_addr.split(";") if part.strip()]

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    def vip_port(self) -> int:
        """Where the VIP port listens: fastListenPort, else listenPort - 2 (any free port
        while listenPort is 0)."""
        if self.fast_listen_port:
            return self.fast_listen_port
        return self.listen_port - 2 if self.listen_port else 0

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.ha_listen_port}"

    def store_config(self) -> StoreConfig:
        """The store's part of the settings."""
        try:
            store_host = pack_host(self.broker_ip1, self.listen_port)
        except ValueError:
            raise ConfigError(f"brokerIP1 {self.broker_ip1!r} is not an IP address") from None
        return StoreConfig(
            root_dir=self.store_path_root_dir,
            store_host=store_host,
            flush="sync" if self.flush_disk_type == "SYNC_FLUSH" else "async",
            sync_flush_timeout=self.sync_flush_timeout / 1000,
            flush_interval=self.flush_interval_commit_log / 1000,
            flush_least_pages=self.flush_commit_log_least_pages,
            flush_thorough_interval=self.flush_commit_log_thorough_interval / 1000,
            max_message_size=self.max_message_size,
            commit_log_file_size=self.mapped_file_size_commit_log,
            consume_queue_file_size=self.mapped_file_size_consume_queue,
            max_mapped_consume_queue_files=self.max_mapped_consume_queue_files,
            commit_log_huge_folios=self.commit_log_huge_folios,
            commit_log_page_cache_window=self.commit_log_page_cache_window,
            message_index_enable=self.message_index_enable,
            max_hash_slot_num=self.max_hash_slot_num,
            max_index_num=self.max_index_num,
            file_reserved_time=self.file_reserved_time,
            delete_when=self.delete_when,
            disk_max_used_space_ratio=self.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio=self.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio=self.disk_space_warning_level_ratio,
            check_crc_on_recover=self.check_crc_on_recover,
        )


def delay_levels_ms(text: str) -> list[int]:
    """``messageDelayLevel`` ("1s 5s ... 2h") as milliseconds per level (level 1 first)."""
    levels = []
    for item in text.split():
        number, unit = item[:-1], item[-1:]
        if unit not in _UNITS or not number.isdigit():
            raise ConfigError(f"messageDelayLevel item {item!r} is not a number with s, m, h or d")
        levels.append(int(number) * _UNITS[unit])
    if not levels:
        raise ConfigError("messageDelayLevel lists no levels")
    return levels
