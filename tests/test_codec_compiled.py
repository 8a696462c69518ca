"""The compiled frame decoder (_frames.c) against the Python code it mirrors: the same
commands, the same errors, for frames of every shape, fed whole or in pieces."""

from __future__ import annotations

import itertools

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


# headers of the usual shape (the helper's), each field now and then odd
USUAL = st.fixed_dictionaries(
    {
        "code": st.integers(-(2**31), 2**31 - 1),
        "opaque": st.one_of(
            st.sampled_from([-(2**31), 2**31 - 1, -(2**31) - 1, 2**31]), st.integers(0, 99)
        ),
        "language": st.sampled_from(["JAVA", "CPP", "GO", "RUST?"]),
        "extFields": st.one_of(
            st.dictionaries(st.text(max_size=4), st.text(max_size=6), max_size=5),
            st.dictionaries(
                st.text(max_size=4),
                st.one_of(
                    st.text(max_size=6), st.integers(-(2**40), 2**40), st.booleans(), st.none()
                ),
                max_size=5,
            ),
        ),
    },
    optional={
        "flag": st.integers(0, 3),
        "version": st.integers(0, 500),
        "remark": st.one_of(st.text(max_size=8), st.none()),
        "serializeTypeCurrentRPC": st.just("JSON"),
    },
)
# prefixes a decoder must refuse or wait on: a length under 4, a header longer than its
# frame, an unknown serialize type
BAD_PREFIXES = st.sampled_from(
    [b"", b"\x00\x00\x00\x02\x00\x00\x00\x00", b"\x00\x00\x00\x06\x00\x00\x00\x09xy",
     b"\x00\x00\x00\x06\x02\x00\x00\x02{}"]
)  # fmt: skip


class CountingHelper:
    """The compiled helper, counting the frames it decoded."""

    def __init__(self, helper) -> None:
        self.helper = helper
        self.decoded = 0

    def decode_frames(self, *arguments):
        commands, position = self.helper.decode_frames(*arguments)
        self.decoded += len(commands)
        return commands, position


def outcome(chunk: bytes, cuts: list[int], limit: int) -> tuple:
    """What a fresh decoder with frames of at most ``limit`` bytes makes of ``chunk`` cut
    at ``cuts``: each command's slots, with their types, then the error, if any."""
    decoder = FrameDecoder(limit)
    commands: list = []
    error = None
    bounds = [0, *sorted(cut for cut in cuts if 0 < cut < len(chunk)), len(chunk)]
    try:
        for start, end in itertools.pairwise(bounds):
            commands += decoder.feed(chunk[start:end])
    except RemoteProtocolError as exc:
        error = (str(exc), exc.opaque, exc.response_code)
    seen = [
        [(type(value), value) for value in map(command.__getattribute__, RemotingCommand.__slots__)]
        for command in commands
    ]
    return seen, error, decoder.buffered


@settings(max_examples=300, deadline=None)
@given(
    first=USUAL,
    headers=st.lists(
        st.tuples(st.one_of(USUAL, HEADERS), st.binary(max_size=40), st.sampled_from([0, 0, 0, 1])),
        max_size=4,
    ),
    cuts=st.lists(st.integers(0, 2000), max_size=3),
    limit=st.sampled_from([MAX_FRAME_LENGTH, 2**63 + 10, 400, 60, 8]),
    garbage=st.sampled_from([b"", b"{not json", b"[1]", b"\xff"]),
    bad_prefix=BAD_PREFIXES,
)
def test_the_compiled_helper_decodes_and_refuses_as_the_python_code(
    first, headers, cuts, limit, garbage, bad_prefix
):
    frames = [frame(orjson.dumps(first), b"body")]
    for header, body, serialize_type in headers:
        if serialize_type == 1:  # a binary header: the Python code's alone
            command = RemotingCommand(RequestCode.SEND_MESSAGE, opaque=3, body=body)
            command.serialize_type = SerializeType.ROCKETMQ
            frames.append(encode_command(command))
        else:
            frames.append(frame(orjson.dumps(header), body))
    if garbage:
        frames.append(frame(garbage))
    chunk = b"".join(frames) + bad_prefix
    counting, original = CountingHelper(compiled_helper()), codec.COMPILED
    try:
        codec.COMPILED = counting
        with_helper = outcome(chunk, cuts, limit)
        codec.COMPILED = None
        assert with_helper == outcome(chunk, cuts, limit)
    finally:
        codec.COMPILED = original
    usual_first = -(2**31) <= first["opaque"] < 2**31 and len(frames[0]) - 4 <= limit - 4
    if usual_first:  # the first frame is the helper's: it decoded it (the others may be)
        assert counting.decoded >= 1


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
