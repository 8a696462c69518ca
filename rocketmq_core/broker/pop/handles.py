"""The POP handle (``extraInfo``, the message property POP_CK) and the offset-info strings
of a POP response (POP.md §3). Sans-IO: text in, values out."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode
from .keys import ORDER_REVIVE_QUEUE, real_topic, topic_flag

SEPARATOR = " "


@dataclass(frozen=True, slots=True)
class PopHandle:
    """What a popped message's handle says: which checkpoint holds it and until when."""

    ck_queue_offset: int  # the checkpoint's start offset
    pop_time: int  # ms
    invisible_time: int  # ms
    revive_qid: int
    flag: str  # "0" normal, "1" read from %RETRY%group_topic, "2" from %RETRY%group+topic
    broker_name: str
    queue_id: int
    queue_offset: int = -1  # the message's own offset (field 8; older clients leave it out)
    commit_log_offset: int = -1  # field 9, appended by a 5.x proxy

    @property
    def orderly(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QUEUE

    @property
    def revive_time(self) -> int:
        """When the message becomes visible again, in ms."""
        return self.pop_time + self.invisible_time

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(self.flag, topic, group)

    def encode(self) -> str:
        fields = [
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.flag,
            self.broker_name,
            self.queue_id,
            self.queue_offset,
        ]
        if self.commit_log_offset >= 0:
            fields.append(self.commit_log_offset)
        return SEPARATOR.join(str(field) for field in fields)

    @classmethod
    def parse(cls, text: str) -> PopHandle:
        """Raises RequestRefused(INVALID_PARAMETER) naming what is wrong with ``text``."""
        fields = text.split(SEPARATOR)
        if len(fields) < 7:
            raise _bad(text, f"it has {len(fields)} space-separated fields, at least 7 needed")
        try:
            return cls(
                int(fields[0]),
                int(fields[1]),
                int(fields[2]),
                int(fields[3]),
                fields[4],
                fields[5],
                int(fields[6]),
                int(fields[7]) if len(fields) > 7 else -1,
                int(fields[8]) if len(fields) > 8 else -1,
            )
        except ValueError:
            raise _bad(text, "a numeric field is not a number") from None


def _bad(text: str, why: str) -> RequestRefused:
    shown = text if len(text) <= 120 else text[:120] + "..."
    return RequestRefused(
        ResponseCode.INVALID_PARAMETER,
        f"extraInfo {shown!r} is not a POP handle: {why}; pass the POP_CK property of the message",
    )


def build_handle(
    ck_queue_offset: int,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    topic: str,
    broker_name: str,
    queue_id: int,
    queue_offset: int,
) -> str:
    """The POP_CK of a message read from ``topic`` (the real one: retry topics flag 1/2)."""
    flag = topic_flag(topic)
    handle = PopHandle(
        ck_queue_offset,
        pop_time,
        invisible_time,
        revive_qid,
        flag,
        broker_name,
        queue_id,
        queue_offset,
    )
    return handle.encode()


def offset_info_entry(topic: str, queue_id: int | str, value: int | str) -> str:
    """One ``flag queueId value`` entry of startOffsetInfo or orderCountInfo."""
    return f"{topic_flag(topic)}{SEPARATOR}{queue_id}{SEPARATOR}{value}"


def msg_offset_entry(topic: str, queue_id: int, offsets: Iterable[int]) -> str:
    """One msgOffsetInfo entry: the queue's popped offsets, comma-separated."""
    return offset_info_entry(topic, queue_id, ",".join(str(offset) for offset in offsets))


def order_count_entry(topic: str, queue_id: int, queue_offset: int, count: int) -> str:
    """How often the message at ``queue_offset`` was delivered before (key ``qo<qid>%<off>``)."""
    return offset_info_entry(topic, f"qo{queue_id}%{queue_offset}", count)


def parse_offset_info(text: str | None) -> dict[str, str]:
    """``flag@key`` -> value of an offset-info string (what a client reads)."""
    parsed: dict[str, str] = {}
    for entry in (text or "").split(";"):
        if entry:
            flag, key, value = entry.split(SEPARATOR)
            parsed[f"{flag}@{key}"] = value
    return parsed
