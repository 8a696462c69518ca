"""The producer reads a send's answer straight from extFields (producer._send_answer);
whatever it reads, or refuses, must be what decoding the whole header gives."""

from __future__ import annotations

import pytest

from rocketmq_core.client.producer import _send_answer
from rocketmq_core.errors import HeaderError
from rocketmq_core.protocol.headers import SendMessageResponseHeader

USUAL = {
    "msgId": "7F00000100002A9F0000000000001234",
    "queueId": "3",
    "queueOffset": "123456",
    "MSG_REGION": "DefaultRegion",
    "TRACE_ON": "true",
}

ANSWERS = {
    "usual": USUAL,
    "transaction": USUAL | {"transactionId": "7F000001ABCD"},
    "timer": USUAL | {"recallHandle": "dGltZXI="},
    "batch ids": USUAL | {"msgId": "AA,BB,CC"},
    "largest offset": USUAL | {"queueOffset": str(2**63 - 1)},
    "negative queue": USUAL | {"queueId": "-1"},
    "no msgId": {key: value for key, value in USUAL.items() if key != "msgId"},
    "no queueOffset": {key: value for key, value in USUAL.items() if key != "queueOffset"},
    "queueId not a number": USUAL | {"queueId": "three"},
    "queueId past int32": USUAL | {"queueId": str(2**31)},
    "queueOffset past int64": USUAL | {"queueOffset": str(2**63)},
}


def decoded(fields: dict[str, str]) -> tuple:
    header = SendMessageResponseHeader.from_ext_fields(fields)
    return (
        header.msg_id,
        header.queue_id,
        header.queue_offset,
        header.transaction_id,
        header.recall_handle,
    )


@pytest.mark.parametrize("fields", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_answer_reads_as_its_header_decodes(fields: dict[str, str]) -> None:
    try:
        expected = decoded(fields)
    except HeaderError as exc:
        with pytest.raises(HeaderError) as refused:
            _send_answer(fields)
        assert str(refused.value) == str(exc)
        assert refused.value.response_code == exc.response_code
    else:
        assert _send_answer(fields) == expected
