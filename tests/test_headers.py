"""Typed custom headers: long and V2 names, C++ typing, required fields."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from rocketmq_core.errors import HeaderError
from rocketmq_core.protocol.codec import FrameDecoder
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.protocol.headers import (
    SEND_V2_NAMES,
    CustomHeader,
    Long,
    PullMessageRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    custom_header,
)
from rocketmq_core.testing.golden import all_frames


def golden(code: int):
    frame = next(g for g in all_frames() if g.code == code and not g.flag & 1)
    return FrameDecoder().feed(frame.frame)[0]


def test_cpp_send_message_header():
    header = SendMessageRequestHeader.from_ext_fields(golden(RequestCode.SEND_MESSAGE).ext_fields)
    assert header.producer_group == "PID-test"
    assert header.topic == "TopicTest"
    assert header.default_topic == "TBW102"
    assert header.default_topic_queue_nums == 4
    assert header.queue_id == 0
    assert header.born_timestamp == 1795317680683
    assert header.batch is False and header.unit_mode is False
    assert header.reconsume_times == 0
    assert header.max_reconsume_times is None


def test_v2_short_names_round_trip():
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic="T",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=-1,
        sys_flag=0,
        born_timestamp=1700000000000,
        flag=0,
        properties="TAGS\x01a\x02",
        batch=True,
        max_reconsume_times=16,
    )
    v2 = header.to_ext_fields(SEND_V2_NAMES)
    assert v2 == {
        "a": "PG",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "-1",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "TAGS\x01a\x02",
        "l": "16",
        "m": "true",
    }
    assert SendMessageRequestHeader.from_ext_fields(v2, SEND_V2_NAMES) == header


def test_binary_v2_golden_frame():
    command = golden(RequestCode.SEND_MESSAGE_V2)
    assert command.ext_fields["m"] == "true"
    with pytest.raises(HeaderError, match="<c> is null"):
        SendMessageRequestHeader.from_ext_fields(command.ext_fields, SEND_V2_NAMES)


def test_cpp_pull_header_with_numbers():
    header = PullMessageRequestHeader.from_ext_fields(golden(RequestCode.PULL_MESSAGE).ext_fields)
    assert (header.queue_id, header.max_msg_nums, header.sys_flag) == (1, 32, 6)
    assert header.queue_offset == 5 and header.suspend_timeout_millis == 15000
    assert header.subscription == "*" and header.expression_type is None


@pytest.mark.parametrize(
    "raw, expected",
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False), ("yes", False)],
)
def test_booleans_as_java_and_cpp_send_them(raw, expected):
    fields = {"group": "g", "topic": "t", "timestamp": "1", "isForce": raw}
    assert ResetOffsetRequestHeader.from_ext_fields(fields).is_force is expected


def test_missing_required_field_names_it():
    with pytest.raises(HeaderError, match=r"the custom field <topic> is null") as caught:
        PullMessageRequestHeader.from_ext_fields({"consumerGroup": "G"})
    assert not caught.value.fatal
    assert caught.value.response_code == 1


def test_bad_integer_names_the_field_and_value():
    with pytest.raises(HeaderError, match=r"<queueId> is not an integer: 'x'"):
        SendMessageResponseHeader.from_ext_fields(
            {"msgId": "m", "queueId": "x", "queueOffset": "1"}
        )


def test_explicit_wire_names_and_strings_out():
    header = SendMessageResponseHeader(
        msg_id="ID", queue_id=1, queue_offset=7, region_id="DefaultRegion", trace_on=False
    )
    assert header.to_ext_fields() == {
        "msgId": "ID",
        "queueId": "1",
        "queueOffset": "7",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "false",
    }
    cpp = {"clientID": "c1", "producerGroup": "", "consumerGroup": "CG"}
    parsed = UnregisterClientRequestHeader.from_ext_fields(cpp)
    assert parsed.client_id == "c1" and parsed.consumer_group == "CG"


def test_wire_name_is_the_key_the_codec_writes():
    assert SendMessageResponseHeader.wire_name("queue_offset") == "queueOffset"
    assert SendMessageResponseHeader.wire_name("region_id") == "MSG_REGION"
    assert UnregisterClientRequestHeader.wire_name("client_id") == "clientID"
    with pytest.raises(AttributeError, match="no field 'topic'"):
        SendMessageResponseHeader.wire_name("topic")


def test_headers_are_slotted():
    header = SendMessageResponseHeader(msg_id="x", queue_id=0, queue_offset=0)
    with pytest.raises(AttributeError):
        header.not_a_field = 1


def _every_header_class():
    import rocketmq_core.protocol.headers as module

    return [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, CustomHeader) and value._fields
    ]


@pytest.mark.parametrize("header_class", _every_header_class(), ids=lambda cls: cls.__name__)
def test_every_header_round_trips_through_its_compiled_codec(header_class):
    # by kind: str, int (an int32), bool, Long (an int64); each at the edge of its range
    samples = {0: "text \u00e9", 1: -(2**31), 2: True, 3: -(2**63)}
    full = header_class(
        **{attribute: samples[kind] for attribute, _wire, kind, _required in header_class._fields}
    )
    fields = full.to_ext_fields()
    assert all(type(value) is str for value in fields.values())
    assert header_class.from_ext_fields(fields) == full
    # only the required fields: the others come back as their defaults
    required = {
        wire: fields[wire] for _attribute, wire, _kind, needed in header_class._fields if needed
    }
    sparse = header_class.from_ext_fields(required)
    for attribute, _wire, _kind, needed in header_class._fields:
        if not needed:
            default = dataclasses.fields(header_class)
            expected = next(field.default for field in default if field.name == attribute)
            assert getattr(sparse, attribute) == expected


def test_a_header_written_another_way_is_read_as_the_usual_one():
    """Annotations the table does not know (Optional[...], a real type) are evaluated."""

    @custom_header
    class Usual(CustomHeader):
        topic: str
        queue_id: int | None
        offset: Long | None = None
        ordered: bool | None = None

    @custom_header
    class Other(CustomHeader):
        topic: typing.Annotated[str, "text"]
        queue_id: typing.Optional[int]  # noqa: UP045 (the other way is the point)
        offset: typing.Optional[Long] = None  # noqa: UP045
        ordered: typing.Union[bool, None] = None  # noqa: UP007

    assert Other._fields == Usual._fields
    fields = {"topic": "T", "queueId": "3", "offset": str(2**40), "ordered": "true"}
    assert Other.from_ext_fields(fields).to_ext_fields() == fields
    assert Usual.__doc__ == "The custom header Usual."


@pytest.mark.parametrize("header_class", _every_header_class(), ids=lambda cls: cls.__name__)
def test_headers_show_and_compare_as_dataclasses_do(header_class):
    """The base class's __repr__ and __eq__ stand in for the ones dataclasses would make
    for each header (a header class then costs its import a third less)."""
    samples = {0: "text", 1: 7, 2: True, 3: 2**40}
    values = {attribute: samples[kind] for attribute, _, kind, _ in header_class._fields}
    header = header_class(**values)
    shown = ", ".join(
        f"{field.name}={getattr(header, field.name)!r}"
        for field in dataclasses.fields(header_class)
        if field.repr
    )
    assert repr(header) == f"{header_class.__qualname__}({shown})"  # dataclasses' form
    assert header == header_class(**values)
    first = header_class._fields[0][0]
    assert header != header_class(**values | {first: None})
    other = next(cls for cls in _every_header_class() if cls is not header_class)
    assert header.__eq__(other(**{a: samples[k] for a, _, k, _ in other._fields})) is (
        NotImplemented
    )
    assert header.__eq__(1) is NotImplemented
    with pytest.raises(TypeError, match="unhashable"):
        hash(header)
