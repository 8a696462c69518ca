"""Whatever bytes arrive, the decoder returns commands or raises RemoteProtocolError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol.codec import FrameDecoder, encode_command
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.testing.golden import all_frames

GOLDEN = [golden.frame for golden in all_frames()]


def decode_in_chunks(data: bytes, sizes: list[int]) -> None:
    decoder = FrameDecoder(max_frame_length=1 << 16)
    position = 0
    try:
        for size in [*sizes, len(data)]:
            for command in decoder.feed(data[position : position + size]):
                assert isinstance(command, RemotingCommand)
                assert all(type(v) is str for v in command.ext_fields.values())
            position += size
    except RemoteProtocolError:
        pass


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.lists(st.integers(1, 64), max_size=20))
def test_random_bytes(data, sizes):
    decode_in_chunks(data, sizes)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(GOLDEN),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.lists(st.integers(1, 64), max_size=10),
)
def test_mutated_golden_frames(frame, flips, sizes):
    data = bytearray(frame)
    for position, value in flips:
        data[position % len(data)] = value
    decode_in_chunks(bytes(data), sizes)


@settings(max_examples=200)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.dictionaries(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=16), max_size=5),
    st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    st.binary(max_size=64),
    st.sampled_from([0, 1]),
)
def test_encode_decode_round_trip(opaque, code, ext_fields, remark, body, serialize_type):
    command = RemotingCommand(
        code,
        opaque=opaque,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=serialize_type,
    )
    (decoded,) = FrameDecoder().feed(encode_command(command))
    assert decoded == command
