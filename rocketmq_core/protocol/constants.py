"""Permission bits, topic flags and well-known names (ROUTE.md §3, §4)."""

from __future__ import annotations

import re
from enum import IntFlag

MASTER_ID = 0
DEFAULT_NAMESRV_PORT = 9876


class Perm(IntFlag):
    """PermName: what producers and consumers may do with a topic or broker."""

    INHERIT = 1  # may serve as an auto-create template (TBW102)
    WRITE = 2
    READ = 4
    PRIORITY = 8

    @staticmethod
    def render(perm: int) -> str:
        """``RW-`` style, as ``mqadmin`` prints it."""
        return (
            ("R" if perm & Perm.READ else "-")
            + ("W" if perm & Perm.WRITE else "-")
            + ("X" if perm & Perm.INHERIT else "-")
        )


PERM_RW = Perm.READ | Perm.WRITE
# plain ints for per-request checks: int & IntFlag builds a flag object (~0.7 us)
PERM_READ, PERM_WRITE = int(Perm.READ), int(Perm.WRITE)


class TopicSysFlag(IntFlag):
    UNIT = 1
    UNIT_SUB = 2


DEFAULT_TOPIC = "TBW102"  # the auto-create template
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # 5.x: where timer (arbitrary delay) messages wait
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
BENCHMARK_TOPIC = "BenchmarkTest"

CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"  # 5.x: a RocksDB store's offsets; reserved here too
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # every topic named so belongs to the broker (timer, revive)
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"  # <cluster>_REPLY_TOPIC carries request-reply answers

# TopicValidator's system topic set, as GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists it; a
# broker adds its own names (topic_validation.broker_system_topics)
SYSTEM_TOPICS = frozenset(
    {
        CHECKPOINT_TOPIC,
        DEFAULT_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        TIMER_TOPIC,
    }
)

# the two statistics VIEW_BROKER_STATS_DATA is asked for by statsAll (Java's names)
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # key: topic; value: messages put
GROUP_GET_NUMS = "GROUP_GET_NUMS"  # key: topic@group; value: messages pulled

# the name-server KV namespace holding per-topic orderly queue layouts
ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"

NAME_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+\Z")
TOPIC_MAX_LENGTH = 127
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255  # 5.x: %RETRY% and %DLQ% topics may be longer
