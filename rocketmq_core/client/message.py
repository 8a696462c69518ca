"""What users send (Message), what they receive (ReceivedMessage) and send results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from ..protocol.compression import decompress
from ..protocol.constants import RETRY_GROUP_TOPIC_PREFIX
from ..protocol.heartbeat import MessageQueue
from ..protocol.message import StoredMessage, host_address

# property keys (MESSAGE.md §4.1)
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"
DELAY = "DELAY"
UNIQ_KEY = "UNIQ_KEY"
RETRY_TOPIC = "RETRY_TOPIC"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"

# set from Message fields; a user property of the same name would be overwritten
RESERVED_PROPERTIES = frozenset(
    {KEYS, TAGS, WAIT, DELAY, UNIQ_KEY, TRAN_MSG, PGROUP, TIMER_DELIVER_MS, TIMER_DELAY_MS}
)


@dataclass
class Message:
    """A message to send. ``keys`` are indexed by the broker (query by key);
    ``delay_level`` (1-based, messageDelayLevel) or ``deliver_time_ms`` (an absolute
    epoch time, RocketMQ 5's timer) defer delivery where the broker has a scheduler."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    deliver_time_ms: int | None = None
    flag: int = 0
    wait_store_ok: bool = True

    def __post_init__(self) -> None:
        if type(self.body) is not bytes:  # the usual body needs none of this
            if isinstance(self.body, str):
                self.body = self.body.encode()
            if not isinstance(self.body, bytes | bytearray | memoryview):
                raise TypeError(f"a message body is bytes, not {type(self.body).__name__}")
            self.body = bytes(self.body)
        if self.delay_level < 0:
            raise ValueError(f"delay_level is 0 (none) or a level from 1, not {self.delay_level}")
        clash = RESERVED_PROPERTIES & self.properties.keys()
        if clash:
            raise ValueError(
                f"properties {sorted(clash)} are set by the client; use the Message fields"
            )

    @property
    def key_list(self) -> list[str]:
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [key for key in self.keys.split(" ") if key]
        return [str(key) for key in self.keys]

    def wire_properties(self, unique_id: str | None) -> dict[str, str]:
        """Every property as it goes on the wire: the user's plus the fields."""
        properties = dict(self.properties)
        if self.tags:
            properties[TAGS] = self.tags
        keys = self.key_list
        if keys:
            properties[KEYS] = " ".join(keys)
        if self.delay_level > 0:
            properties[DELAY] = str(self.delay_level)
        if self.deliver_time_ms is not None:
            properties[TIMER_DELIVER_MS] = str(self.deliver_time_ms)
        properties[WAIT] = "true" if self.wait_store_ok else "false"
        if unique_id:
            properties[UNIQ_KEY] = unique_id
        return properties


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str  # the client's unique id (UNIQ_KEY): what users look messages up by
    offset_msg_id: str  # the broker's id: store host and CommitLog offset
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    # for a timer message (deliver_time_ms): what Producer.recall cancels it with
    recall_handle: str | None = None


@dataclass(slots=True)
class ReceivedMessage:
    """A message as consumers see it: body inflated, a retry's original topic restored."""

    topic: str
    body: bytes
    properties: dict[str, str]
    queue: MessageQueue
    queue_offset: int
    commit_log_offset: int
    msg_id: str
    offset_msg_id: str
    reconsume_times: int
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    sys_flag: int
    flag: int

    @property
    def tags(self) -> str | None:
        return self.properties.get(TAGS)

    @property
    def keys(self) -> list[str]:
        return [key for key in self.properties.get(KEYS, "").split(" ") if key]

    @property
    def delay_level(self) -> int:
        return int(self.properties.get(DELAY, "0") or 0)

    @classmethod
    def of(cls, stored: StoredMessage, broker_name: str) -> ReceivedMessage:
        properties = stored.properties
        topic = stored.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and RETRY_TOPIC in properties:
            topic = properties[RETRY_TOPIC]
        return cls(
            topic=topic,
            body=decompress(stored.body, stored.sys_flag),
            properties=properties,
            queue=MessageQueue(stored.topic, broker_name, stored.queue_id),
            queue_offset=stored.queue_offset,
            commit_log_offset=stored.commit_log_offset,
            msg_id=stored.msg_id,
            offset_msg_id=stored.offset_msg_id,
            reconsume_times=stored.reconsume_times,
            born_timestamp=stored.born_timestamp,
            store_timestamp=stored.store_timestamp,
            born_host=host_address(stored.born_host),
            store_host=host_address(stored.store_host),
            sys_flag=stored.sys_flag,
            flag=stored.flag,
        )
