"""The POP request and response headers, with Java's field names (POP.md §1)."""

from __future__ import annotations

from ...protocol.headers import CustomHeader, Long, custom_header


@custom_header
class PopMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int  # -1: every queue of the topic
    max_msg_nums: int
    invisible_time: Long
    poll_time: Long
    born_time: Long
    init_mode: int  # 0 MIN, 1 MAX: where a group without an offset starts
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@custom_header
class PopMessageResponseHeader(CustomHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int
    rest_num: Long
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@custom_header
class AckMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long
    broker_name: str | None = None


@custom_header
class ChangeInvisibleTimeRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long
    invisible_time: Long
    broker_name: str | None = None


@custom_header
class ChangeInvisibleTimeResponseHeader(CustomHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int


@custom_header
class PeekMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int


@custom_header
class NotificationRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    poll_time: Long
    born_time: Long
    order: bool | None = None
    attempt_id: str | None = None


@custom_header
class NotificationResponseHeader(CustomHeader):
    has_msg: bool
    polling_full: bool = False


@custom_header
class PollingInfoRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int


@custom_header
class PollingInfoResponseHeader(CustomHeader):
    polling_num: int
