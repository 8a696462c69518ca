"""ConsumeMessageDirectlyResult: a consumer's answer to CONSUME_MESSAGE_DIRECTLY (309),
which the broker relays from an admin (``mqadmin queryMsgById -g -d``, the dashboard's
message and dead-letter pages): how its listener took one message it was handed."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from .. import fastjson
from ..json_body import body_decoder, load_object, to_int


class CMResult(Enum):
    """What the listener did with the message (Java's CMResult, names as on the wire)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"  # it asked for the message again later
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"  # the remark says what it raised
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(slots=True)
class ConsumeMessageDirectlyResult:
    consume_result: CMResult | None = None
    order: bool = False  # the consumer is an orderly one
    auto_commit: bool = True
    remark: str | None = None
    spent_time_mills: int = 0  # "Mills", as Java spells it

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "autoCommit": self.auto_commit,
            "order": self.order,
            "spentTimeMills": self.spent_time_mills,
        }
        if self.consume_result is not None:
            value["consumeResult"] = self.consume_result.value
        if self.remark is not None:
            value["remark"] = self.remark
        return fastjson.dumps(value)

    @classmethod
    @body_decoder("consume message directly result")
    def decode(cls, data: bytes) -> ConsumeMessageDirectlyResult:
        value = load_object(data, "consume message directly result")
        result = value.get("consumeResult")
        return cls(
            consume_result=CMResult(result) if result is not None else None,
            order=bool(value.get("order", False)),
            auto_commit=bool(value.get("autoCommit", True)),
            remark=value.get("remark"),
            spent_time_mills=to_int(
                value.get("spentTimeMills", 0), "spentTimeMills", "consume message directly result"
            ),
        )
