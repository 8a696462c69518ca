"""The frame codec: golden frames, C++ quirks, both header encodings, every error; each
test runs with the compiled decoding helper (_frames.c) and with the Python code alone
(test_codec_compiled.py holds the two to the same commands and errors)."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from rocketmq_core.errors import LocalProtocolError, RemoteProtocolError
from rocketmq_core.protocol import codec
from rocketmq_core.protocol.codec import MAX_FRAME_LENGTH, FrameDecoder, encode_command
from rocketmq_core.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketmq_core.protocol.command import OpaqueSequence, RemotingCommand
from rocketmq_core.testing.golden import all_frames, captured_frames

GOLDEN = all_frames()


@pytest.fixture(params=["compiled", "python"], autouse=True)
def decoding_path(request, monkeypatch):
    """Every test here runs with the compiled helper and with the Python code alone."""
    monkeypatch.setattr(
        codec, "COMPILED", compiled_helper() if request.param == "compiled" else None
    )
    return request.param


def compiled_helper():
    if codec.compiled is None:
        pytest.fail(
            "rocketmq_core.protocol._frames is not built: reinstall rocketmq-core with a C compiler"
        )
    return codec.compiled


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    length = 4 + len(header) + len(body)
    prefix = length.to_bytes(4, "big") + (serialize_type << 24 | len(header)).to_bytes(4, "big")
    return prefix + header + body


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda g: g.name)
def test_golden_frame_whole_and_byte_by_byte(golden):
    (whole,) = FrameDecoder().feed(golden.frame)
    decoder = FrameDecoder()
    piecewise = []
    for index in range(len(golden.frame)):
        piecewise += decoder.feed(golden.frame[index : index + 1])
    assert piecewise == [whole]
    assert decoder.buffered == 0
    assert (whole.code, whole.opaque, whole.flag) == (golden.code, golden.opaque, golden.flag)
    assert whole.serialize_type == golden.frame[4]
    if golden.ext_fields is not None:
        assert whole.ext_fields == golden.ext_fields
    if golden.body is not None:
        assert whole.body == golden.body
    if golden.remark is not None:
        assert whole.remark == golden.remark
    # what we decode, we encode back to a frame that decodes the same
    assert FrameDecoder().feed(encode_command(whole)) == [whole]


@pytest.mark.parametrize("serialize_type", list(SerializeType), ids=lambda t: t.name)
def test_each_decoder_sets_every_slot_of_the_command(serialize_type):
    # the JSON decoder fills a bare object (no __init__): a slot it forgets is unset
    golden = next(g for g in GOLDEN if g.frame[4] == serialize_type)
    (decoded,) = FrameDecoder().feed(golden.frame)
    slots = RemotingCommand.__slots__
    assert [slot for slot in slots if not hasattr(decoded, slot)] == []
    # and each slot carries what was sent: a command with no default left in it
    sent = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        opaque=77,
        flag=1,
        remark="why",
        ext_fields={"a": "1"},
        body=b"payload",
        language=LanguageCode.GO,
        version=399,
        serialize_type=serialize_type,
    )
    defaults = RemotingCommand(0)
    assert [slot for slot in slots if getattr(sent, slot) == getattr(defaults, slot)] in (
        [],
        ["serialize_type"],  # JSON is the default encoding
    )
    (received,) = FrameDecoder().feed(encode_command(sent))
    assert {slot: getattr(received, slot) for slot in slots} == {
        slot: getattr(sent, slot) for slot in slots
    }


def test_cpp_send_message_quirks():
    send = next(g for g in captured_frames() if g.code == RequestCode.SEND_MESSAGE)
    (command,) = FrameDecoder().feed(send.frame)
    header_text = send.frame[8 : 8 + int.from_bytes(send.frame[4:8], "big")]
    assert header_text.endswith(b"}\n")  # jsoncpp's trailing newline
    assert b'"queueId":0' in header_text  # a JSON number where Java sends a string
    assert command.ext_fields["queueId"] == "0"
    assert command.ext_fields["batch"] == "0"  # booleans as "0"/"1"
    assert command.ext_fields["AccessKey"] == ""  # always signed, even without credentials
    assert command.language == LanguageCode.CPP
    assert command.version == 63
    assert command.flag == 0
    assert command.body == b"hello rocketmq"
    assert "\x01order-42\x02" in command.ext_fields["properties"]


def test_many_frames_in_one_chunk_and_a_frame_split_across_chunks():
    commands = [
        RemotingCommand(code, opaque=code, body=bytes([code]) * code) for code in range(1, 40)
    ]
    stream = b"".join(encode_command(command) for command in commands)
    decoder = FrameDecoder()
    cut = len(stream) // 2 + 3
    first = decoder.feed(stream[:cut])
    assert 0 < len(first) < len(commands) and decoder.buffered > 0
    assert first + decoder.feed(stream[cut:]) == commands
    assert decoder.buffered == 0


def test_a_chunk_completing_a_held_frame_is_not_copied_whole():
    """Pipelined senders cut nearly every read inside a frame. The decoder takes from
    the next chunk only what the held frame lacks, and decodes the rest from the chunk
    itself: appending 256 KiB chunks to the held bytes cost a copy of each and freshly
    zeroed pages for the grown buffer (11% of a broker's CPU under batched sends)."""
    commands = [RemotingCommand(10, opaque=n, body=b"%05d" % n * 200) for n in range(1, 400)]
    stream = b"".join(encode_command(command) for command in commands)
    chunk_size = 64 * 1024 + 7  # never on a frame boundary
    chunks = [stream[at : at + chunk_size] for at in range(0, len(stream), chunk_size)]
    decoder = FrameDecoder()
    decoded, most_held = [], 0
    tracemalloc.start()
    try:
        for chunk in chunks:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            decoded += decoder.feed(chunk)
            _, peak = tracemalloc.get_traced_memory()
            most_held = max(most_held, decoder.buffered)
            # the chunk's commands (about its size) and a frame: no second copy of it
            assert peak - before < len(chunk) * 1.4, (peak - before, len(chunk))
    finally:
        tracemalloc.stop()
    assert decoded == commands and decoder.buffered == 0
    assert 0 < most_held < len(encode_command(commands[0]))


def test_a_frame_in_many_pieces_and_a_length_in_pieces():
    commands = [RemotingCommand(11, opaque=n, body=bytes(3000)) for n in range(1, 4)]
    stream = b"".join(encode_command(command) for command in commands)
    for pieces in ([1, 1, 1, 1, 2000], [2, 5000, 3], [3, 3, 3, 9000], [6100]):
        decoder, decoded, at = FrameDecoder(), [], 0
        for size in pieces:
            decoded += decoder.feed(stream[at : at + size])
            at += size
        decoded += decoder.feed(stream[at:])
        assert decoded == commands and decoder.buffered == 0


def test_json_header_values_are_always_emitted_as_strings():
    command = RemotingCommand(
        RequestCode.PULL_MESSAGE, ext_fields={"queueId": 3, "suspend": True, "topic": "T"}
    )
    header = orjson.loads(encode_command(command)[8:])
    assert header["extFields"] == {"queueId": "3", "suspend": "true", "topic": "T"}
    assert header["language"] == "JAVA"
    assert "remark" not in header


def test_json_header_quirks_are_accepted():
    header = (
        b'{"code":"34","opaque":"5","flag":0,"language":"NO_SUCH_LANGUAGE",'
        b'"extFields":{"a":1,"b":true,"c":null,"d":1.5,"e":[1]}}\r\n \n'
    )
    (command,) = FrameDecoder().feed(frame(header))
    assert command.code == 34 and command.opaque == 5
    assert command.language == LanguageCode.OTHER
    assert command.remark is None
    assert command.ext_fields == {"a": "1", "b": "true", "d": "1.5", "e": "[1]"}


def test_binary_header_round_trip_keeps_its_encoding():
    command = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        opaque=-5,
        remark="r\u00e9mark",
        ext_fields={"a": "PG", "b": "T\u00f6pic"},
        body=b"\x00\x01",
        language=LanguageCode.GO,
        serialize_type=SerializeType.ROCKETMQ,
    )
    data = encode_command(command)
    assert data[4] == SerializeType.ROCKETMQ
    assert FrameDecoder().feed(data) == [command]
    response = command.response(ResponseCode.SYSTEM_BUSY, "busy")
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert encode_command(response)[4] == SerializeType.ROCKETMQ


def test_binary_header_drops_empty_values_as_java_does():
    command = RemotingCommand(1, ext_fields={"kept": "x", "empty": ""}, serialize_type=1)
    (decoded,) = FrameDecoder().feed(encode_command(command))
    assert decoded.ext_fields == {"kept": "x"}


def test_binary_header_cannot_carry_codes_over_16_bits():
    pop = RemotingCommand(RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(LocalProtocolError, match="16 bits"):
        encode_command(pop)
    pop.serialize_type = SerializeType.JSON
    assert FrameDecoder().feed(encode_command(pop))[0].code == 200050


def test_the_largest_frame_passes_and_one_byte_more_is_refused():
    empty = RemotingCommand(RequestCode.SEND_MESSAGE, opaque=9)
    overhead = len(encode_command(empty))
    empty.body = b"b" * (MAX_FRAME_LENGTH - overhead)
    data = encode_command(empty)
    assert len(data) == MAX_FRAME_LENGTH
    assert FrameDecoder().feed(data)[0].body == empty.body
    empty.body += b"b"
    with pytest.raises(LocalProtocolError, match="exceeds the limit"):
        encode_command(empty)


def test_oversized_frame_names_the_request_when_its_header_arrived():
    small = encode_command(RemotingCommand(RequestCode.SEND_MESSAGE, opaque=31))
    too_long = (MAX_FRAME_LENGTH - 3).to_bytes(4, "big") + small[4:]
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError) as caught:
        decoder.feed(too_long)
    assert caught.value.opaque == 31
    assert caught.value.response_code == ResponseCode.MESSAGE_ILLEGAL
    assert caught.value.fatal
    # the stream cannot be resynchronised: every later feed fails the same way
    with pytest.raises(RemoteProtocolError):
        decoder.feed(small)
    for cut in (1, 2, 3):  # the length in two reads: refused once whole, header and all
        decoder = FrameDecoder()
        assert decoder.feed(too_long[:cut]) == []
        with pytest.raises(RemoteProtocolError) as caught:
            decoder.feed(too_long[cut:])
        assert caught.value.opaque == 31, cut


def test_a_smaller_limit_is_honoured():
    data = encode_command(RemotingCommand(1, body=b"x" * 100))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 64 bytes"):
        FrameDecoder(max_frame_length=64).feed(data)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x00\x00\x00\x02\x00\x00", "at least 4 bytes"),
        (b"\x00\x00\x00\x06\x00\x00\x00\x09{}", "bad header length 9"),
        (frame(b"{}", serialize_type=2), "unknown serialize type 2"),
        (frame(b"{not json"), "not valid JSON"),
        (frame(b"[1,2]"), "not an object"),
        (frame(b'{"opaque":4}'), "has no 'code'"),
        (frame(b'{"code":"x1","opaque":4}'), "'code' is not an integer"),
        (frame(b'{"code":1,"opaque":4,"remark":5}'), "'remark' is not a string"),
        (frame(b'{"code":1,"opaque":4,"extFields":[1]}'), "'extFields' is not an object"),
        (frame(b'{"code":1,"opaque":4294967296}'), "not an int32"),
        (frame(b"\x00\x01\x00\x00\x01", serialize_type=1), "shorter than 21 bytes"),
        (frame(bytes(13) + b"\x00\x00\x00\x09" + bytes(4), serialize_type=1), "remark length"),
        (frame(bytes(17) + b"\x00\x00\x00\x09", serialize_type=1), "extFields length"),
    ],
)
def test_malformed_input_raises_a_protocol_error(data, message):
    with pytest.raises(RemoteProtocolError, match=message) as caught:
        FrameDecoder().feed(data)
    assert caught.value.response_code in (ResponseCode.SYSTEM_ERROR, ResponseCode.MESSAGE_ILLEGAL)


def test_protocol_errors_carry_the_opaque_once_it_is_known():
    with pytest.raises(RemoteProtocolError) as caught:
        FrameDecoder().feed(frame(b'{"opaque":12,"code":"nope"}'))
    assert caught.value.opaque == 12


def test_response_mirrors_the_request():
    request = RemotingCommand(RequestCode.HEART_BEAT, opaque=77, serialize_type=1)
    response = request.response(ResponseCode.SUCCESS, ext_fields={"k": "v"})
    assert response.is_response and not request.is_response
    assert (response.opaque, response.serialize_type) == (77, 1)
    assert "HEART_BEAT(34)" in repr(request) and "SUCCESS(0)" in repr(response)


def test_oneway_request_flag():
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"a": "b"}, oneway=True)
    assert request.is_oneway
    assert FrameDecoder().feed(encode_command(request))[0].is_oneway


def test_opaque_sequence_wraps_within_int32():
    sequence = OpaqueSequence(start=0x7FFFFFFE)
    assert [sequence.next() for _ in range(3)] == [0x7FFFFFFE, 0x7FFFFFFF, 0]


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":"--1","opaque":1}',
        b'{"code":"\xc2\xb2","opaque":1}',
        b'{"code":"' + b"9" * 5000 + b'","opaque":1}',
        b'{"code":1,"opaque":1,"extFields":{"a":' + b"[" * 300 + b"]" * 300 + b"}}",
    ],
    ids=["double-minus", "superscript-digit", "huge-number", "deep-nesting"],
)
def test_hostile_headers_stay_protocol_errors(header):
    with pytest.raises(RemoteProtocolError):
        FrameDecoder().feed(frame(header))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (frame(b"{bad"), "not valid JSON"),
        ((MAX_FRAME_LENGTH).to_bytes(4, "big"), "exceeds the limit"),
        (b"\x00\x00\x00\x06\x00\x00\x00\x09xy", "bad header length"),
    ],
    ids=["header", "length", "header-length"],
)
def test_frames_before_a_bad_one_are_delivered_then_the_error(bad, message):
    good = encode_command(RemotingCommand(1, opaque=1))
    decoder = FrameDecoder()
    assert [c.opaque for c in decoder.feed(good + good + bad)] == [1, 1]
    assert decoder.failure is not None and message in str(decoder.failure)
    assert decoder.buffered == 0  # no bytes are held for a stream that has stopped
    with pytest.raises(RemoteProtocolError, match=message):
        decoder.feed(good)


def test_a_stopped_stream_holds_no_bytes_even_when_a_frame_had_begun_in_a_chunk_before():
    large = encode_command(RemotingCommand(1, opaque=1, body=b"x" * 5000))
    decoder = FrameDecoder()
    assert decoder.feed(large[:100]) == [] and decoder.buffered == 100
    too_long = MAX_FRAME_LENGTH.to_bytes(4, "big")
    assert [c.opaque for c in decoder.feed(large[100:] + too_long)] == [1]
    assert decoder.buffered == 0 and decoder.failure is not None


def test_encoding_failures_are_local_protocol_errors():
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        encode_command(RemotingCommand(1, body="text, not bytes"))
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        encode_command(RemotingCommand(1, ext_fields={"k": {1, 2}}))
