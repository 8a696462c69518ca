"""Runs of usual sends answered before decoding (processors/send_frames.py) against the
general path: the same answers, the same stored bytes and counts, for requests one at a
time and all written at once, for every form of header a client may write, and a put
that fails answered as a processor's failure is."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.processors import send as send_processor
from rocketmq_core.broker.processors import send_fast, send_frames
from rocketmq_core.broker.put_hooks import PutHooks
from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codec import FrameDecoder, decode_json_header, encode_command
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.constants import PERM_RW
from rocketmq_core.protocol.message import encode_properties as props
from rocketmq_core.store.api import MessageToStore, PutResult, PutStatus
from rocketmq_core.testing.broker import broker_config
from tests.metrics.conftest import scrape, value

from .test_ha import FakeSlave
from .test_send_fast_path import (
    answers_and_store,
    connected,
    free_ports,
    read_frame,
    send,
    usual_sends,
)

pytestmark = pytest.mark.anyio


async def frames_against_general(tmp_path, plugin_host, monkeypatch, requests, **options):
    """The answers and stored bytes with runs of frames, then with the general path
    alone: asserted the same; the answers."""
    ports = free_ports()
    results = {}
    for name, frames in (("frames", True), ("general", False)):
        monkeypatch.setattr(send_frames, "ENABLED", frames)
        monkeypatch.setattr(send_fast, "ENABLED", frames)
        results[name] = await answers_and_store(
            tmp_path / name, plugin_host, requests(), **ports, **options
        )
    (answers, log, queues), (general_answers, general_log, general_queues) = results.values()
    for number, (ours, general) in enumerate(zip(answers, general_answers, strict=True), 1):
        assert ours == general, f"answer to request {number} differs"
    assert log == general_log
    assert queues == general_queues
    return answers


async def send_all(peer, requests: list) -> list[bytes]:
    """``requests`` written at once (opaques 1, 2, ...); their answer frames, as read."""
    for opaque, request in enumerate(requests, 1):
        request.opaque = opaque
    await peer.send(b"".join(encode_command(request) for request in requests))
    buffered = bytearray()
    with anyio.fail_after(10):
        return [await read_frame(peer, buffered) for _ in requests]


def codes(answers: list[bytes | None]) -> list[int | None]:
    return [FrameDecoder().feed(a)[0].code if a is not None else None for a in answers]


async def test_sends_written_at_once_answer_and_store_as_the_general_path(
    tmp_path, plugin_host, monkeypatch, runs
):
    # answered inline on both paths (a put that waits in a task, as a put hook's may,
    # is stored when the read loop yields, which it does at other points on each path)
    def requests():
        usual = [request for request in usual_sends() if not request.flag]  # no oneway
        return [send(body=b"%d" % n, queue_id=n % 4) for n in range(40)] + [
            send(topic="NewTopic"),  # created by the general path
            send(body=b"after the new topic"),
            *usual,
        ]

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, pipelined=True
    )
    assert set(codes(answers)[:43]) == {ResponseCode.SUCCESS}
    # each queue's first put is the general path's, dispatched in its turn; the usual
    # sends after those are served, up to the new topic: from there on in a chunk every
    # frame is decoded (commands decoded before a frame are dispatched before it is put).
    # 36 when the connection reads it all at once
    assert 0 < runs.served <= 36


async def test_sends_one_at_a_time_are_each_a_run(tmp_path, plugin_host, monkeypatch, runs):
    def requests():
        return [send(body=b"%d" % n, queue_id=n % 4) for n in range(20)]

    answers = await frames_against_general(tmp_path, plugin_host, monkeypatch, requests)
    assert set(codes(answers)) == {ResponseCode.SUCCESS}
    assert runs.served == 16  # each queue's first put is the general path's


async def test_a_connections_kept_run_follows_the_broker(tmp_path, plugin_host, runs):
    """A connection keeps what its runs read while nothing it is made of changes: a new
    maxMessageSize, put hooks or a closed store's append are followed at once."""
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        async with connected(broker) as peer:
            await send_all(peer, [send()])  # the queue's first put
            assert codes(await send_all(peer, [send(body=b"x" * 100)])) == [0]
            assert runs.served == 1
            broker.config.max_message_size = 50
            answers = await send_all(peer, [send(body=b"x" * 100)])
            assert codes(answers) == [ResponseCode.MESSAGE_ILLEGAL]  # the general path's
            assert codes(await send_all(peer, [send(body=b"x" * 10)])) == [0]
            assert runs.served == 2
            broker.put_hooks = PutHooks([_marked_hook(b"TAGS\x01")])  # every usual send
            assert codes(await send_all(peer, [send(body=b"x" * 10)])) == [0]
            assert runs.served == 2


def _marked_hook(marker: bytes):
    """A put hook that leaves messages as they are, declaring ``marker``."""

    def hook(message):
        return message

    hook.markers = (marker,)  # type: ignore[attr-defined]
    return hook


@pytest.mark.parametrize("acks", [True, False], ids=["acked", "never-acked"])
async def test_a_sync_masters_runs_answer_once_the_slave_has_them(
    tmp_path, plugin_host, monkeypatch, runs, acks
):
    """SEND_OK once a slave acks the run's end; FLUSH_SLAVE_TIMEOUT after slaveTimeout
    from a slave that never acks; the same answers as each send's own wait gives."""

    no_wait = props({"WAIT": "false", "UNIQ_KEY": "AB2"})
    upper_case = props({"WAIT": "TRUE", "UNIQ_KEY": "AB3"})  # waits, as Java reads it
    no_wait_either = props({"WAIT": "0", "UNIQ_KEY": "AB4"})  # not "true": does not wait

    def requests():
        warm = [send(body=b"first %d" % n, queue_id=n) for n in range(4)]  # the queues' first
        return [
            *warm,
            *[send(body=b"%d" % n, queue_id=n % 4) for n in range(23)],
            send(body=b"TRUE", properties=upper_case),
            send(body=b"no wait", properties=no_wait),  # answered at once: not a run's
            *[send(body=b"%d" % n, queue_id=n % 4) for n in range(24, 30)],
            send(body=b"0", properties=no_wait_either),
        ]

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, pipelined=True, slave=True,
        slave_acks=acks, broker_role="SYNC_MASTER", slave_timeout=300,
    )  # fmt: skip
    expected = ResponseCode.SUCCESS if acks else ResponseCode.FLUSH_SLAVE_TIMEOUT
    got = codes(answers)
    assert got[28] == got[35] == ResponseCode.SUCCESS  # WAIT false, WAIT 0
    assert set(got[:28] + got[29:35]) == {expected}
    assert runs.served == 24  # up to the send that does not wait; the rest are decoded


async def test_sends_too_far_ahead_of_the_slave_are_not_available_the_rest_wait(
    tmp_path, plugin_host, monkeypatch, runs
):
    """haSlaveFallbehindMax splits a run: its first sends wait for the slave (here until
    slaveTimeout), the ones past the limit are SLAVE_NOT_AVAILABLE at once."""

    def requests():
        warm = [send(body=b"first %d" % n, queue_id=n) for n in range(4)]
        return warm + [send(body=b"%060d" % n, queue_id=n % 4) for n in range(30)]

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, pipelined=True, slave=True,
        slave_acks=False, broker_role="SYNC_MASTER", slave_timeout=300,
        ha_slave_fallbehind_max=4000,
    )  # fmt: skip
    got = codes(answers)
    assert ResponseCode.FLUSH_SLAVE_TIMEOUT in got and ResponseCode.SLAVE_NOT_AVAILABLE in got
    first_refused = got.index(ResponseCode.SLAVE_NOT_AVAILABLE)
    assert set(got[first_refused:]) == {ResponseCode.SLAVE_NOT_AVAILABLE}
    assert runs.served > 0


@contextlib.asynccontextmanager
async def sync_master_told_acks(tmp_path, plugin_host):
    """A SYNC_MASTER (slaveTimeout 500 ms) whose slave acks only what a test tells it to,
    and a connection to it whose first send (Orders, queue 0: the queue's first put) was
    acked and answered: (broker, slave, peer, the peer's read buffer)."""
    config = broker_config(tmp_path, broker_role="SYNC_MASTER", slave_timeout=500, **free_ports())
    async with Broker.serving(config, host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        async with FakeSlave.following(broker, acking=False) as slave, connected(broker) as peer:
            buffered = bytearray()
            warm = send(body=b"warm")
            warm.opaque = 99
            await peer.send(encode_command(warm))
            await slave.report(broker.store.max_commit_log_offset)
            with anyio.fail_after(10):
                await read_frame(peer, buffered)
            yield broker, slave, peer, buffered


async def write_requests(peer, requests: list) -> None:
    """``requests`` written at once, numbered 1, 2, ... by their opaques."""
    for opaque, request in enumerate(requests, 1):
        request.opaque = opaque
    await peer.send(b"".join(encode_command(request) for request in requests))


async def codes_of_answers(peer, buffered: bytearray, count: int) -> list[int]:
    """The codes of the answers to requests 1 to ``count`` (write_requests'), read."""
    with anyio.fail_after(10):
        frames = [await read_frame(peer, buffered) for _ in range(count)]
    by_opaque = {
        command.opaque: command.code for frame in frames for command in FrameDecoder().feed(frame)
    }
    return [by_opaque[number] for number in range(1, count + 1)]


@pytest.mark.parametrize("frames", [True, False], ids=["runs", "general"])
async def test_a_slave_that_acks_part_of_a_run_before_the_timeout(
    tmp_path, plugin_host, monkeypatch, runs, frames
):
    """The sends the slave acked are SEND_OK, the rest FLUSH_SLAVE_TIMEOUT: per send, as
    each one's own wait gives it, though a run waited once."""
    monkeypatch.setattr(send_frames, "ENABLED", frames)
    async with sync_master_told_acks(tmp_path, plugin_host) as (broker, slave, peer, buffered):
        base = broker.store.max_commit_log_offset
        requests = [send(body=b"%04d" % n) for n in range(20)]  # records of one size
        await write_requests(peer, requests)
        with anyio.fail_after(10):
            while broker.store.max_commit_log_offset < base + 20:
                await anyio.sleep(0.01)
            while (broker.store.max_commit_log_offset - base) % 20:
                await anyio.sleep(0.01)
        record = (broker.store.max_commit_log_offset - base) // 20
        await slave.report(base + 8 * record)  # the first eight
        answers = await codes_of_answers(peer, buffered, len(requests))
    assert answers == [ResponseCode.SUCCESS] * 8 + [ResponseCode.FLUSH_SLAVE_TIMEOUT] * 12
    assert (runs.served == 20) is frames


def raw_send(header: str, body: bytes) -> bytes:
    encoded = header.encode()
    return struct.pack(">II", 4 + len(encoded) + len(body), len(encoded)) + encoded + body


def canonical_fields(**changes) -> dict:
    fields = {"a": "PG", "b": "Orders", "c": "TBW102", "d": 4, "e": 1, "f": 0}
    fields |= {"g": "1700000000000", "h": 0, "i": props({"TAGS": "T", "UNIQ_KEY": "AB1"})}
    fields |= {"j": "0", "k": "false", "m": "false"}
    fields |= changes
    return {key: value for key, value in fields.items() if value is not None}


V2 = send_fast._V2_NAMES
V1_BY_V2 = dict(zip(V2, send_fast._V1_NAMES, strict=True))


def v1_fields(fields: dict) -> dict:
    """The same fields by SEND_MESSAGE's names."""
    return {V1_BY_V2.get(key, key): value for key, value in fields.items()}


def header(opaque: int, fields: dict | None = None, **top) -> str:
    return json.dumps(
        {"code": 310, "extFields": fields or canonical_fields(), "flag": 0, "language": "CPP",
         "opaque": opaque, "version": 395, **top},
        separators=(",", ":"),
    )  # fmt: skip


# (header text of request number n, whether a run answers it)
HEADER_FORMS = [
    (lambda n: header(n), True),
    (lambda n: header(n).replace(":", " : ").replace(",", " ,\n\t"), True),
    (lambda n: header(n, serializeTypeCurrentRPC="JSON", remark=None, other=True), True),
    (lambda n: header(n, remark='hello \\" there'), True),
    (lambda n: json.dumps({"opaque": n, "extFields": canonical_fields(), "code": 310}), True),
    (lambda n: header(n).replace('"a":', '"\\u0061":').replace('"PG"', '"P\\/G"'), True),
    (lambda n: header(n, canonical_fields(k=None, m=False, j=3, x=None)), True),
    (lambda n: header(n, canonical_fields(i="TAGS\\u0001T\\u0002KEYS\\u0001k\\n")), True),
    (lambda n: header(n, canonical_fields(d=-0.0)), False),  # a float: the codec's
    (lambda n: header(n, canonical_fields(e="1e0")), False),
    (lambda n: header(n, canonical_fields(i=-(2**63) - 1)), False),  # orjson: a float
    (lambda n: header(n, canonical_fields(a="PGé")), False),  # not ASCII
    (lambda n: header(n, version="395"), False),  # a number as text: the codec reads it
    (lambda n: header(n, language=1), False),
    (lambda n: header(n, other=[1]), False),
    (lambda n: header(n).replace('"b":"Orders"', '"b":"Tagged","b":"Orders"'), False),
    (lambda n: header(n).replace('"code":310', '"code":310,"code":310'), False),
    (lambda n: header(n, code=10), False),  # SEND_MESSAGE: its names differ
    (lambda n: header(n, v1_fields(canonical_fields()), code=10), True),  # as the C++ client
    (
        lambda n: header(n, canonical_fields(d="4", e="1", h="0", n="broker-a"), language="PYTHON"),
        True,
    ),  # as our SDK writes it (all text, brokerName)
    (lambda n: header(n, v1_fields(canonical_fields(AccessKey="", Signature="x=")), code=10), True),
    (lambda n: header(n, canonical_fields(m="true")), False),  # a batch
    (lambda n: header(n, canonical_fields(b="%RETRY%PG")), False),
    (lambda n: header(n, canonical_fields(b="NewTopic")), False),
    (lambda n: header(n, canonical_fields(e=-1)), False),
    (lambda n: header(n, canonical_fields(i=props({"DELAY": "1"}))), False),
    (lambda n: header(n, canonical_fields(i=props({"UNIQ_KEY": "a-b"}))), False),
    (lambda n: header(n) + " ", True),
]


@pytest.mark.parametrize("pipelined", [False, True], ids=["one-at-a-time", "at-once"])
async def test_every_form_of_header_answers_as_the_general_path(
    tmp_path, plugin_host, monkeypatch, runs, pipelined
):
    def requests():
        return [raw_send(form(n), b"form %d" % n) for n, (form, _) in enumerate(HEADER_FORMS, 1)]

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, pipelined=pipelined
    )
    assert all(answer is not None for answer in answers)
    if not pipelined:  # one request a chunk: each one is a run, or not (the first is
        # the queue's first put, which the general path makes)
        assert runs.served == sum(served for _, served in HEADER_FORMS) - 1


async def test_a_put_that_raises_is_answered_as_a_failure_and_the_rest_are_served(
    tmp_path, plugin_host, runs
):
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        usual_append = broker.store.usual_append
        calls = 0

        def failing_second_put():
            append = usual_append()

            def put(message):
                nonlocal calls
                calls += 1
                if calls == 2:
                    raise OSError("the disk went away")
                return append(message)

            return put

        broker.store.usual_append = failing_second_put
        async with connected(broker) as peer:
            frames = await send_all(peer, [send(body=b"%d" % n) for n in range(4)])
            answers = [FrameDecoder().feed(frame)[0] for frame in frames]
        stored = broker.stats.puts["Orders"][0]
    assert [answer.opaque for answer in answers] == [1, 2, 3, 4]
    assert [answer.code for answer in answers] == [0, ResponseCode.SYSTEM_ERROR, 0, 0]
    assert answers[1].remark == "OSError: the disk went away"
    # the first put to the queue was declined by the usual append (the general path made
    # it), the second raised, the last two were served
    assert runs.served == 2
    assert stored == 3


async def test_stored_sends_are_counted_as_one_at_a_time(tmp_path, plugin_host, monkeypatch, runs):
    counted = await counted_both_ways(
        tmp_path, plugin_host, monkeypatch, lambda: [[send(body=b"x" * n) for n in range(1, 30)]]
    )
    assert counted[True][0]["Orders"][0] == 29
    assert runs.served > 0


async def counted_both_ways(tmp_path, plugin_host, monkeypatch, writes, **options) -> dict:
    """The broker's counts (puts by topic, messages, bytes, the CommitLog's end) once
    each list of requests ``writes()`` gives is written at once and answered, with runs
    and with the general path alone: asserted the same; by whether runs were on."""
    counted = {}
    for frames in (True, False):
        monkeypatch.setattr(send_frames, "ENABLED", frames)
        monkeypatch.setattr(send_fast, "ENABLED", frames)
        config = broker_config(tmp_path / str(frames), **options)
        async with Broker.serving(config, host=plugin_host) as broker:
            broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
            async with connected(broker) as peer:
                for requests in writes():
                    await send_all(peer, requests)
            stats = broker.stats
            counted[frames] = (
                dict(stats.puts),
                stats.stored_messages,
                stats.stored_bytes,
                broker.store.max_commit_log_offset,
            )
    assert counted[True] == counted[False]
    return counted


def test_a_feed_says_whether_frames_were_served_before_decoding():
    """The read loop takes served frames as progress: a peer whose reads all end inside
    a frame, each completing the one before, is not an incomplete frame that lingers."""
    frame = encode_command(send(body=b"x" * 100))
    decoder = FrameDecoder()
    decoder.serve_first = lambda source, position: position + len(frame)
    assert decoder.feed(frame + frame[:50]) == [] and decoder.served
    assert decoder.buffered == 50
    decoder.serve_first = lambda source, position: position
    assert len(decoder.feed(frame[50:])) == 1 and not decoder.served


def test_runs_read_no_freed_memory_under_the_debug_allocator():
    """serve_sends under PYTHONMALLOC=debug, which fills freed memory: an answer built
    from bytes already freed (a UNIQ_KEY read from properties the put let go) differs
    from the general path's."""
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         f"{__file__}::test_sends_one_at_a_time_are_each_a_run",
         f"{__file__}::test_every_form_of_header_answers_as_the_general_path"],
        env={**os.environ, "PYTHONMALLOC": "debug"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]


# --- the header reader against the header codec, on headers of every shape --------------

_VALUES = st.one_of(
    st.text(alphabet='09-+ _aZé\x01\x02"\\/\n', max_size=6),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
)
_CANONICAL = canonical_fields(e=3, i=props({"TAGS": "T", "UNIQ_KEY": "AB1", "K": "x\ny"}))
_CANONICAL_HEADER = {"code": 310, "extFields": _CANONICAL, "flag": 0, "language": "JAVA",
                     "opaque": 9}  # fmt: skip


@st.composite
def headers(draw) -> bytes:
    """A send's JSON header: the canonical one, some of its values, keys and text
    changed the ways a client, a proxy or an attacker might write it."""
    fields = dict(_CANONICAL)
    for key in draw(st.lists(st.sampled_from([*fields, "l", "n", "zz"]), max_size=3)):
        fields[key] = draw(_VALUES)
    for key in draw(st.lists(st.sampled_from(list(fields)), max_size=2)):
        fields.pop(key, None)
    top = dict(_CANONICAL_HEADER, extFields=fields)
    for key in draw(
        st.lists(
            st.sampled_from(["code", "flag", "opaque", "version", "language", "remark", "other"]),
            max_size=2,
        )
    ):
        top[key] = draw(_VALUES)  # fmt: skip
    if draw(st.booleans()):  # SEND_MESSAGE, with its long names (the C++ client's)
        top["code"] = RequestCode.SEND_MESSAGE
        top["extFields"] = {V1_BY_V2.get(key, key): value for key, value in fields.items()}
    order = draw(st.permutations(list(top)))
    text = json.dumps({key: top[key] for key in order}, ensure_ascii=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 2))):  # duplicates, escapes, spaces, stray bytes
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(
            st.sampled_from(['"b":"Orders",', '"code":310,', "\\u0061", " ", "\\/", "}", ","])
        ) + text[at:]  # fmt: skip
    return text.encode()


def _expected(header: bytes) -> tuple | None:
    """What the general path would put for this header: None where it refuses or does not
    take it the fast way at all (the run must then leave the frame)."""
    try:
        command = decode_json_header(header)
    except RemoteProtocolError:
        return None
    if command.flag & 3:
        return None
    if command.code not in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        return None
    names = send_fast._V1_NAMES if command.code == RequestCode.SEND_MESSAGE else V2
    fields = send_fast._read_fields(command.ext_fields, names)
    if fields is None:
        return None
    topic, queue_id, sys_flag, born, flag, reconsume, properties, _ = fields
    encoded = send_processor._with_cluster(properties or "", "Cluster").encode()
    return topic, queue_id, sys_flag, born, flag, reconsume, encoded, command.opaque


def serve_one(
    header: bytes, body: bytes = b"body", frame_check: tuple | None = None
) -> tuple[int, list[MessageToStore], bytes | None]:
    """serve_sends of one frame with this header and body, its puts captured, each frame
    checked with ``frame_check`` (AclValidator.frame_check's) when given: (where it
    stopped, the messages put, the answers)."""
    return serve_frames([(header, body)], frame_check)


def serve_frames(
    frames: list[tuple[bytes, bytes]], frame_check: tuple | None = None
) -> tuple[int, list[MessageToStore], bytes | None]:
    """serve_one of frames (header, body) one after another, in one call."""
    if send_fast.compiled is None:
        pytest.fail("rocketmq_core.broker.processors._send_fast is not built")
    source = b"".join(
        struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body
        for header, body in frames
    )
    put: list[MessageToStore] = []

    def append(message):
        put.append(message)
        return PutResult.written([4096], 7, 1, b"\x7f\x00\x00\x01\x00\x00\x27\x10", -1)

    answer = send_fast._answer_frame("DefaultRegion", False).template
    topics = {name: TopicConfig(name, 8, 8, PERM_RW) for name in ("Orders", "Refunds")}
    run = (1 << 24, send_frames._NAMES, b"Cluster", 1 << 22, (),
           {name.encode(): name for name in topics}, topics, b"\x7f\x00\x00\x01\x00\x00\x00\x01",
           MessageToStore, append, PutStatus.PUT_OK, answer, 100, None, 64,
           frame_check, False)  # fmt: skip
    position, answers, *_ = send_fast.compiled.serve_sends(run, source, 0)
    return position, put, answers


def test_the_canonical_header_is_served():
    position, put, answers = serve_one(json.dumps(_CANONICAL_HEADER).encode())
    assert position > 0 and len(put) == 1 and answers is not None


@settings(max_examples=int(os.environ.get("SERVE_EXAMPLES", "400")), deadline=None)
@given(header=headers())
def test_a_served_header_is_read_as_the_header_codec_reads_it(header):
    position, put, answers = serve_one(header)
    expected = _expected(header)
    if position == 0:  # left to the decoder: always allowed
        assert not put
        return
    assert expected is not None, f"served a header the general path does not take: {header!r}"
    (message,) = put
    topic, queue_id, sys_flag, born, flag, reconsume, encoded, opaque = expected
    assert (message.topic, message.queue_id, message.sys_flag, message.born_timestamp) == (
        topic, queue_id, sys_flag, born)  # fmt: skip
    assert (message.flag, message.reconsume_times, message.properties) == (
        flag, reconsume, encoded)  # fmt: skip
    assert message.body == b"body"
    assert FrameDecoder().feed(answers)[0].opaque == opaque


async def test_with_metrics_on_runs_are_served_and_their_sends_timed(tmp_path, plugin_host, runs):
    """Request timing wraps the processors; the runs stay and tell it of their sends (each
    counted in rocketmq_rpc_latency, SEND_OK), as the wrapped processor would."""
    config = broker_config(
        tmp_path,
        metrics_exporter_type="PROM",
        metrics_prom_exporter_host="127.0.0.1",
        metrics_prom_exporter_port=0,
    )
    async with Broker.serving(config, host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        assert broker.server.processors.frame_server is not None
        async with connected(broker) as peer:
            await send_all(peer, [send(body=b"%d" % n, queue_id=n % 4) for n in range(40)])
        samples = await anyio.to_thread.run_sync(scrape, broker.metrics_address)
    sends = {"request_code": "send_message_v2", "response_code": "success", "result": "success"}
    timed = value(samples, "rocketmq_rpc_latency_milliseconds_count", **sends)
    assert runs.served > 0
    # the runs' sends, each; the rest (each queue's first) timed one in SAMPLE_EVERY
    assert runs.served <= timed <= runs.served + 40
