"""The compiled frame decoder (_frames.c) against the Python code it mirrors: the same
commands, the same errors, for frames of every shape, fed whole or in pieces."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol import codec
from rocketmq_core.protocol.codec import MAX_FRAME_LENGTH, FrameDecoder, encode_command
from rocketmq_core.protocol.codes import RequestCode, SerializeType
from rocketmq_core.protocol.command import RemotingCommand
from tests.test_codec import compiled_helper, frame

# headers of every shape the decoders meet: the usual ones and each kind of oddity
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(-9, 9), max_size=2),
)
HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "code": st.one_of(st.integers(-(2**31), 2**31), st.sampled_from(["310", "x", True])),
        "opaque": st.one_of(st.integers(-(2**32), 2**32), st.sampled_from(["7", None])),
        "flag": st.one_of(st.integers(0, 3), st.sampled_from(["1", None, False])),
        "version": st.one_of(st.integers(0, 500), st.sampled_from(["63", 1.5])),
        "language": st.one_of(st.sampled_from(["JAVA", "CPP", "PYTHON", "RUST?"]), JSON_VALUES),
        "remark": st.one_of(st.text(max_size=8), st.none(), st.integers(-9, 9)),
        "extFields": st.one_of(
            st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=5),
            st.dictionaries(st.text(max_size=4), st.text(max_size=6), max_size=5),
            st.none(),
            st.lists(st.integers(-9, 9), max_size=1),
        ),
        "serializeTypeCurrentRPC": st.just("JSON"),
    },
)


def outcome(chunk: bytes, pieces: int) -> tuple:
    """What a fresh decoder makes of ``chunk`` fed in ``pieces`` parts: each command's
    slots (and the type of its serialize type), then the error, if any."""
    decoder = FrameDecoder()
    commands: list = []
    error = None
    step = max(1, len(chunk) // pieces)
    try:
        for start in range(0, len(chunk), step):
            commands += decoder.feed(chunk[start : start + step])
    except RemoteProtocolError as exc:
        error = (str(exc), exc.opaque, exc.response_code)
    seen = [
        (
            *(getattr(command, name) for name in RemotingCommand.__slots__),
            type(command.serialize_type),
        )
        for command in commands
    ]
    return seen, error, decoder.buffered


@settings(max_examples=300, deadline=None)
@given(
    headers=st.lists(
        st.tuples(HEADERS, st.binary(max_size=40), st.sampled_from([0, 0, 0, 1])),
        min_size=1,
        max_size=5,
    ),
    pieces=st.integers(1, 3),
    garbage=st.sampled_from([b"", b"{not json", b"[1]", b"\xff"]),
)
def test_the_compiled_helper_decodes_and_refuses_as_the_python_code(headers, pieces, garbage):
    frames = []
    for header, body, serialize_type in headers:
        if serialize_type == 1:  # a binary header: the Python code's alone
            command = RemotingCommand(RequestCode.SEND_MESSAGE, opaque=3, body=body)
            command.serialize_type = SerializeType.ROCKETMQ
            frames.append(encode_command(command))
        else:
            frames.append(frame(orjson.dumps(header), body))
    if garbage:
        frames.append(frame(garbage))
    chunk = b"".join(frames)
    helper, original = compiled_helper(), codec.COMPILED
    try:
        codec.COMPILED = helper
        with_helper = outcome(chunk, pieces)
        codec.COMPILED = None
        assert with_helper == outcome(chunk, pieces)
    finally:
        codec.COMPILED = original


def test_the_helper_stops_at_frames_left_to_the_python_code():
    helper = compiled_helper()
    usual = frame(b'{"code":10,"opaque":1,"language":"JAVA","extFields":{"a":1}}', b"b")
    odd = frame(b'{"code":"10","opaque":2,"language":"JAVA"}')  # a numeric string
    arguments = (codec._loads, RemotingCommand, codec._SLOTS, codec._LANGUAGE_BY_NAME,
                 codec._OTHER, codec._JSON)  # fmt: skip
    source = usual + odd + usual
    decoded, position = helper.decode_frames(source, 0, MAX_FRAME_LENGTH - 4, *arguments)
    assert [command.opaque for command in decoded] == [1] and position == len(usual)
    assert decoded[0].ext_fields == {"a": "1"} and decoded[0].body == b"b"
    decoded, position = helper.decode_frames(source, len(usual + odd), 1000, *arguments)
    assert len(decoded) == 1 and position == len(source)
    # unfinished, and a length the Python code refuses: nothing decoded
    assert helper.decode_frames(usual[:-1], 0, 1000, *arguments) == ([], 0)
    assert helper.decode_frames(usual, 0, 4, *arguments) == ([], 0)
    with pytest.raises(TypeError):
        helper.decode_frames(usual, 0, 64, codec._loads, RemotingCommand, (), {}, 0, 0)
