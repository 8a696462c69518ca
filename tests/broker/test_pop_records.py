"""The sans-IO parts of POP: handles, offset infos, revive records, batch-ack bodies."""

from __future__ import annotations

import base64

import orjson
import pytest

from rocketmq_core.broker.pop.handles import PopHandle, build_handle, parse_offset_info
from rocketmq_core.broker.pop.keys import normal_topic, pop_retry_topic, real_topic, topic_flag
from rocketmq_core.broker.pop.records import (
    Ack,
    Checkpoint,
    RecordFormatError,
    decode_batch_ack,
    encode_bitset,
)
from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import ResponseCode


def test_a_handle_has_java_s_nine_fields_and_parses_back():
    text = build_handle(5, 1700000000000, 30000, 3, "%RETRY%G_T", "broker-a", 2, 7)
    assert text == "5 1700000000000 30000 3 1 broker-a 2 7"
    handle = PopHandle.parse(text + " 123456")  # the proxy's CommitLog offset
    assert (handle.ck_queue_offset, handle.revive_time, handle.commit_log_offset) == (
        5,
        1700000030000,
        123456,
    )
    assert handle.real_topic("T", "G") == "%RETRY%G_T"
    assert not handle.orderly and PopHandle.parse("0 1 2 999 0 b 0 0").orderly


@pytest.mark.parametrize("text", ["", "1 2 3", "a 1 2 3 0 b 0 0"])
def test_a_bad_handle_is_an_invalid_parameter_naming_it(text):
    with pytest.raises(RequestRefused) as refused:
        PopHandle.parse(text)
    assert refused.value.code == ResponseCode.INVALID_PARAMETER
    assert "POP handle" in refused.value.remark


def test_retry_topic_names_v1_and_v2():
    assert pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert [topic_flag(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    assert real_topic("2", "T", "G") == "%RETRY%G+T" and real_topic("0", "T", "G") == "T"
    assert normal_topic("%RETRY%G_T", "G") == "T" == normal_topic("%RETRY%G+T", "G")


def test_offset_infos_parse_as_a_client_keys_them():
    assert parse_offset_info("0 0 5;1 0 2") == {"0@0": "5", "1@0": "2"}
    assert parse_offset_info("0 qo1%7 2") == {"0@qo1%7": "2"}
    assert parse_offset_info("") == {}


def test_checkpoint_and_ack_records_use_java_s_short_keys():
    ck = Checkpoint(10, 1000, 2000, 1, "T", "G", "b", [0, 2])
    assert orjson.loads(ck.encode()) == {
        "so": 10,
        "pt": 1000,
        "it": 2000,
        "bm": 0,
        "n": 2,
        "q": 1,
        "t": "T",
        "c": "G",
        "ro": 0,
        "d": [0, 2],
        "bn": "b",
    }
    assert Checkpoint.decode(ck.encode()) == ck
    assert ck.offsets == [10, 12] and ck.index_of(12) == 1 and ck.index_of(11) == -1
    assert ck.unique_key() == "T@1@10@G@1000@b@ck"
    ack = Ack([12], 10, "G", "T", 1, 1000, "b")
    assert orjson.loads(ack.encode())["ao"] == 12 and ack.key == ck.key
    long_names = (
        b'{"ackOffset":3,"startOffset":1,"consumerGroup":"G","topic":"T",'
        b'"queueId":0,"popTime":5,"brokerName":"b"}'
    )
    assert Ack.decode(long_names).ack_offsets == [3]
    assert Ack.decode(Ack([1, 2], 0, "G", "T", 0, 5, "b").encode()).ack_offsets == [1, 2]
    with pytest.raises(RecordFormatError):
        Checkpoint.decode(b'{"so": 1}')


def test_a_batch_ack_body_reads_java_s_bitset():
    assert base64.b64decode(encode_bitset([0, 2, 9])) == bytes([0b101, 0b10])
    body = {
        "brokerName": "b",
        "acks": [
            {
                "c": "G",
                "t": "T",
                "r": "1",
                "so": 4,
                "q": 0,
                "rq": 2,
                "pt": 1,
                "it": 9,
                "b": encode_bitset([1, 3]),
            }
        ],
    }
    broker_name, (entry,) = decode_batch_ack(orjson.dumps(body))
    assert broker_name == "b" and entry.indexes == [1, 3] and entry.retry == "1"
    with pytest.raises(RecordFormatError):
        decode_batch_ack(b"[1]")
