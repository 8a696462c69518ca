"""Which topic names are valid, which belong to the broker, and which no client may
send to: TopicValidator's rules (ROUTE.md §4), as pure functions of the name.

System topics are the broker's own: admin requests may neither create, change nor
delete them (a changed TBW102 breaks auto-creation for every producer). Retry and
dead-letter topics (``%RETRY%group``, ``%DLQ%group``) are not system topics: operators
change them, e.g. to make a DLQ readable.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from .constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    NAME_PATTERN,
    OFFSET_MOVED_EVENT,
    REPLY_TOPIC_SUFFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    RETRY_OR_DLQ_TOPIC_MAX_LENGTH,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TIMER_TOPIC,
    TOPIC_MAX_LENGTH,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

# topics only the broker writes to: a client's send to one is refused (NO_PERMISSION)
SEND_FORBIDDEN_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        TIMER_TOPIC,
    }
)


@functools.lru_cache(maxsize=4096)  # asked on every send; a producer reuses its topics
def topic_problem(topic: str) -> str | None:
    """Why ``topic`` is not a valid topic name (the meaning of Java's remarks), or None."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not NAME_PATTERN.match(topic):
        return (
            f"The specified topic[{topic}] contains illegal characters,"
            " allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        limit = RETRY_OR_DLQ_TOPIC_MAX_LENGTH
    else:
        limit = TOPIC_MAX_LENGTH
    if len(topic) > limit:
        return f"The specified topic is longer than topic max length {limit}."
    return None


def send_forbidden(topic: str) -> bool:
    """Whether clients may not send to ``topic`` (the broker writes it itself)."""
    return topic in SEND_FORBIDDEN_TOPICS


def broker_system_topics(
    cluster_name: str, broker_name: str, extra: Iterable[str] = ()
) -> frozenset[str]:
    """The system topics of one broker: the fixed set, the topics named after its
    cluster and itself (route probes), the cluster's reply topic, and ``extra`` (the
    trace topic when the broker keeps one)."""
    own = {cluster_name, broker_name, cluster_name + REPLY_TOPIC_SUFFIX, *extra}
    return SYSTEM_TOPICS | own


def is_system_topic(topic: str, system_topics: frozenset[str] = SYSTEM_TOPICS) -> bool:
    """Whether ``topic`` belongs to the broker: one of ``system_topics`` or ``rmq_sys_*``."""
    return topic in system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)


def system_topic_refusal(topic: str) -> str:
    """The remark refusing an admin change to a system topic."""
    return (
        f"The topic[{topic}] is a system topic: the broker owns it, so it cannot be"
        " created, changed or deleted"
    )
