"""Names POP uses: the revive topic, the POP retry topics, record tags (POP.md §2)."""

from __future__ import annotations

from ...protocol.constants import RETRY_GROUP_TOPIC_PREFIX

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # whose offsets say how far each revive queue is done
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
ORDER_REVIVE_QUEUE = 999  # the reviveQid of an orderly POP's handle: it has no checkpoint
RETRY_QUEUE_NUMS = 1  # a POP retry topic has one queue (Java's PopAckConstants.retryQueueNum)
# flags of the handle's fifth field and of the offset-info entries
NORMAL_FLAG = "0"
RETRY_FLAG = "1"
RETRY_V2_FLAG = "2"


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """``%RETRY%group_topic`` (v1, the default) or ``%RETRY%group+topic`` (enableRetryTopicV2)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_retry(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def topic_flag(topic: str) -> str:
    """The flag a handle or offset-info entry carries for messages read from ``topic``."""
    if not is_retry(topic):
        return NORMAL_FLAG
    return RETRY_V2_FLAG if "+" in topic else RETRY_FLAG


def real_topic(flag: str, topic: str, group: str) -> str:
    """The topic a handle's message was read from: ``topic`` is the one the client knows."""
    if flag == RETRY_FLAG and not is_retry(topic):
        return pop_retry_topic(topic, group)
    if flag == RETRY_V2_FLAG and not is_retry(topic):
        return pop_retry_topic(topic, group, v2=True)
    return topic


def normal_topic(topic: str, group: str) -> str:
    """The topic a POP retry topic retries, or ``topic`` itself."""
    for separator in ("_", "+"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{separator}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic
