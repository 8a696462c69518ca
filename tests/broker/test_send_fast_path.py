"""The send fast path (processors/send_fast.py) against the general path (send.py).

The same requests go, one after another on one connection, to a broker with the fast
path and its compiled helper on, to a fresh one with the Python fast path alone and to
one with the fast path off (same port, same peer address, store time held at one
value): every answer frame and the stored CommitLog and consume queues must be the
same bytes. The cases cover what the fast path takes and what it must leave to the
general path (delay, transactions, new topics, batches, compressed bodies, bad
fields, a slave, SYNC_MASTER, SYNC_FLUSH, ACL). The compiled helper is also held to
the Python code field by field.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
from pathlib import Path
from types import MappingProxyType

import anyio
import pytest
from anyio.abc import SocketStream
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_core.acl.guard import AclGuard
from rocketmq_core.acl.signing import Credentials, sign
from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.processors import send_fast, send_frames
from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codec import FrameDecoder, encode_command
from rocketmq_core.protocol.codes import FLAG_ONEWAY, RequestCode, ResponseCode, SerializeType
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.compression import CompressionType, compress
from rocketmq_core.protocol.constants import PERM_READ, PERM_RW
from rocketmq_core.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from rocketmq_core.protocol.message import TRANSACTION_PREPARED, BatchItem, encode_batch
from rocketmq_core.protocol.message import encode_properties as props
from rocketmq_core.remoting.connection import Connection
from rocketmq_core.store.api import MessageToStore
from rocketmq_core.testing.broker import broker_config
from tests.processes import listen_port_with_free_neighbours

from .test_ha import FakeSlave

pytestmark = pytest.mark.anyio

PEER = "127.0.0.1:40000"
STORE_TIME = 4_102_444_800_000  # 2100-01-01: the store clock never goes below it
_LENGTH = struct.Struct(">I")


def send(
    topic="Orders",
    body=b"hello",
    *,
    code=RequestCode.SEND_MESSAGE_V2,
    properties: str | None = props({"TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": "AB12"}),
    queue_id=0,
    sys_flag=0,
    change: dict[str, str | None] | None = None,
    **fields,
) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=1700000000000,
        flag=7,
        properties=properties,
        **fields,
    )
    ext = header.to_ext_fields(None if code == RequestCode.SEND_MESSAGE else SEND_V2_NAMES)
    for key, value in (change or {}).items():
        if value is None:
            ext.pop(key, None)
        else:
            ext[key] = value
    return RemotingCommand.request(code, ext, body)


def free_ports() -> dict[str, int]:
    """Ports for both brokers of a comparison: the listen port is in every message id."""
    listen = listen_port_with_free_neighbours()
    return {"listen_port": listen, "ha_listen_port": listen + 1, "fast_listen_port": listen - 2}


async def read_frame(stream: SocketStream, buffered: bytearray) -> bytes:
    while len(buffered) < 4 or len(buffered) < 4 + _LENGTH.unpack_from(buffered)[0]:
        buffered += await stream.receive()
    size = 4 + _LENGTH.unpack_from(buffered)[0]
    frame = bytes(buffered[:size])
    del buffered[:size]
    return frame


@contextlib.asynccontextmanager
async def connected(broker):
    """A peer on a socket pair whose other end a Connection of ``broker`` serves (the
    broker's processors and hooks); the connection is closed on leaving."""
    async with served(broker) as (peer, _connection):
        yield peer


@contextlib.asynccontextmanager
async def served(broker, socket_buffer: int | None = None):
    """``connected``'s peer and the Connection serving it (with ``socket_buffer``: the
    connection's send buffer and the peer's receive buffer that small)."""
    ours, theirs = socket.socketpair()
    if socket_buffer is not None:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_buffer)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, socket_buffer)
    server = broker.server
    connection = Connection(
        await SocketStream.from_socket(ours),
        server.processors,
        hooks=server.hooks,
        budget=server.budget,
        peer_address=PEER,
    )
    async with (
        anyio.create_task_group() as task_group,
        await SocketStream.from_socket(theirs) as peer,
    ):
        await task_group.start(connection.run)
        yield peer, connection
        await connection.aclose()


async def answers_and_store(
    directory: Path,
    plugin_host,
    requests: list[RemotingCommand | bytes],
    slave: bool = False,
    pipelined: bool = False,
    slave_acks: bool = True,
    **overrides,
) -> tuple[list[bytes], bytes, dict[str, bytes]]:
    """Each request's answer frame (None for a oneway one), the CommitLog's written
    bytes and every consume-queue file, from a fresh broker in ``directory``; with
    ``slave``, one that acks each frame follows it (a SYNC_MASTER's sends wait for it;
    one that never acks with ``slave_acks=False``).
    A request may be a finished frame (bytes) whose opaque is its number. With
    ``pipelined``, every request is written at once and the answers are taken in the
    order of their opaques."""
    random.seed(7)  # a queue id of -1 picks the same queues in both runs
    config = broker_config(directory, **overrides)
    answers: list[bytes | None] = []
    async with (
        Broker.serving(config, host=plugin_host) as broker,
        FakeSlave.following(broker, acking=slave_acks) if slave else contextlib.nullcontext(),
    ):
        broker.store.clock.last = STORE_TIME
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        broker.topics.update(TopicConfig("ReadOnly", 4, 4, PERM_READ))
        broker.topics.update(TopicConfig("Tagged", 4, 4, PERM_RW, topic_filter_type="MULTI_TAG"))
        async with connected(broker) as peer:
            buffered = bytearray()
            frames = []
            for opaque, request in enumerate(requests, 1):
                if isinstance(request, RemotingCommand):
                    request.opaque = opaque
                    frames.append((encode_command(request), bool(request.flag & FLAG_ONEWAY)))
                else:
                    frames.append((request, False))
            if pipelined:
                await peer.send(b"".join(frame for frame, _ in frames))
                by_opaque: dict[int, bytes] = {}
                with anyio.fail_after(10):
                    while len(by_opaque) < sum(not oneway for _, oneway in frames):
                        frame = await read_frame(peer, buffered)
                        by_opaque[FrameDecoder().feed(frame)[0].opaque] = frame
                answers = [by_opaque.get(number) for number in range(1, len(frames) + 1)]
            for frame, oneway in frames if not pipelined else ():
                await peer.send(frame)
                if oneway:
                    answers.append(None)
                else:
                    with anyio.fail_after(10):
                        answers.append(await read_frame(peer, buffered))
        end = broker.store.max_commit_log_offset
    logs = sorted((directory / "commitlog").iterdir())
    log = b"".join(path.read_bytes() for path in logs)[:end]
    queues = {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted((directory / "consumequeue").rglob("*"))
        if path.is_file()
    }
    for name, entries in queues.items():
        if name.startswith("consumequeue/SCHEDULE_TOPIC_XXXX/"):
            queues[name] = without_tags_codes(entries)
    return answers, log, queues


def without_tags_codes(entries: bytes) -> bytes:
    """Consume-queue entries with their tags code zeroed: a delayed message's is its
    delivery time, taken from the wall clock when it is sent."""
    masked = bytearray(entries)
    for start in range(0, len(masked), 20):
        masked[start + 12 : start + 20] = bytes(8)
    return bytes(masked)


def compiled_helper():
    if send_fast.compiled is None:
        pytest.fail(
            "rocketmq_core.broker.processors._send_fast is not built:"
            " reinstall rocketmq-core with a C compiler"
        )
    return send_fast.compiled


def test_the_compiled_helper_is_built():
    assert callable(compiled_helper().read_send)
    assert callable(compiled_helper().answer_frame)


# (fast path on, its compiled helper on, runs of frames on): the runs answered before
# decoding (send_frames), the compiled helper, the Python fast path (the helper's
# reference) and the general path, which all are held to; without a build of the helper
# (test_the_compiled_helper_is_built fails) the Python ones are still compared
PATHS = {
    "frames": (True, True, True),
    "compiled": (True, True, False),
    "python-fast": (True, False, False),
    "general": (False, False, False),
}


async def assert_same(tmp_path, plugin_host, monkeypatch, make_requests, **overrides) -> list:
    """The paths give the same answers and store the same bytes; the answers."""
    ports = free_ports()
    results = {}
    for name, (fast, with_helper, frames) in PATHS.items():
        if with_helper and send_fast.compiled is None:
            continue
        monkeypatch.setattr(send_fast, "ENABLED", fast)
        monkeypatch.setattr(send_fast, "COMPILED", send_fast.compiled if with_helper else None)
        monkeypatch.setattr(send_frames, "ENABLED", frames)
        results[name] = await answers_and_store(
            tmp_path / name, plugin_host, make_requests(), **ports, **overrides
        )
    answers, log, queues = results["general"]
    for name in results.keys() - {"general"}:
        fast_answers, fast_log, fast_queues = results[name]
        for number, (ours, general) in enumerate(zip(fast_answers, answers, strict=True)):
            assert ours == general, f"{name}: answer {number} differs"
        assert fast_log == log, name
        assert fast_queues == queues, name
    return answers


def usual_sends() -> list[RemotingCommand]:
    oneway = send(body=b"oneway")
    oneway.flag |= FLAG_ONEWAY
    binary = send(body=b"binary header")
    binary.serialize_type = SerializeType.ROCKETMQ
    return [
        send(),
        send(body=b"x" * 1024, queue_id=3),
        send(properties=props({"TAGS": "TagA"})),  # no UNIQ_KEY: no transactionId
        send(properties=None),
        send(properties=props({"UNIQ_KEY": "not-plain"})),  # answered the general way
        send(properties=props({"UNIQ_KEY": "ünïcode"})),
        send(code=RequestCode.SEND_MESSAGE, body=b"v1 names"),
        send(code=RequestCode.SEND_BATCH_MESSAGE, body=b"batch code, one message"),
        send(queue_id=-1),
        send(reconsume_times=2, max_reconsume_times=5, unit_mode=False, broker_name="b"),
        send(topic="Tagged", properties=props({"TAGS": "a||b", "UNIQ_KEY": "C0FFEE"})),
        send(body=b""),
        oneway,
        binary,
        send(body=b"after"),
        # forms only the Python code reads (the compiled helper answers None for them)
        send(change={"e": "+1", "h": "007", "j": "-0"}),
        send(change={"g": "1_700_000_000_000"}),
        send(change={"m": "false"}),
        send(change={"m": "False"}),
        send(properties=props({"TAGS": "T", "CLUSTER": "elsewhere", "UNIQ_KEY": "AB13"})),
        send(properties=props({"KEYS": "xUNIQ_KEY", "UNIQ_KEY": "AB14"}) + "\x02"),
        send(properties=props({"UNIQ_KEY": ""})),
        send(properties="TAGS\x01ünï\x02UNIQ_KEY\x01AB15"),
    ]


def general_sends() -> list[RemotingCommand]:
    """What the fast path leaves to the general path, interleaved with usual sends."""
    batch = encode_batch(
        [BatchItem(0, b"one", props({"KEYS": "a"}).encode()), BatchItem(0, b"two", b"")]
    )
    return [
        send(properties=props({"DELAY": "2", "UNIQ_KEY": "D1"})),  # a put hook's
        send(properties=props({"DELAY": "1"}), queue_id=-1),  # one random queue drawn
        send(
            properties=props({"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": "T1"}),
            sys_flag=TRANSACTION_PREPARED,
        ),
        send(topic="NewTopic"),  # created in the send
        send(topic="%RETRY%CG"),
        send(topic="ReadOnly"),
        send(topic="bad topic!"),
        send(
            body=compress(b"z" * 2000, CompressionType.ZLIB), sys_flag=CompressionType.ZLIB.sys_flag
        ),
        send(code=RequestCode.SEND_BATCH_MESSAGE, body=batch, batch=True),
        send(queue_id=99),
        send(body=b"y" * (4 * 1024 * 1024 + 1)),  # over maxMessageSize
        send(change={"e": "abc"}),
        send(change={"e": str(1 << 40)}),
        send(change={"a": None}),
        send(change={"g": None}),
        send(change={"j": " 3"}),  # int() reads it, as the header codec does
        send(),
    ]


async def test_usual_sends_answer_and_store_the_same_bytes(tmp_path, plugin_host, monkeypatch):
    answers = await assert_same(tmp_path, plugin_host, monkeypatch, usual_sends)
    assert answers[12] is None  # oneway: no answer on either path
    assert b'"code":0' in answers[0] and b'"transactionId":"AB12"' in answers[0]


class DecidingHelper:
    """The compiled helper, noting which requests (by body) its send_one answered."""

    def __init__(self, helper) -> None:
        self.helper = helper
        self.read_send = helper.read_send
        self.answer_frame = helper.answer_frame
        self.answered: list[bytes] = []
        self.left: list[bytes] = []

    def send_one(self, broker, ctx, request, references):
        answer = self.helper.send_one(broker, ctx, request, references)
        (self.left if answer is None else self.answered).append(request.body)
        return answer


async def test_the_compiled_send_answers_the_usual_sends_and_leaves_the_rest(
    tmp_path, plugin_host, monkeypatch
):
    deciding = DecidingHelper(compiled_helper())
    monkeypatch.setattr(send_fast, "COMPILED", deciding)
    monkeypatch.setattr(send_frames, "ENABLED", False)  # send_one's choices, not the runs'
    finished_in_python: list[bytes] = []  # answers the compiled path left to _after_put

    def after_put(broker, ctx, request, *rest):
        finished_in_python.append(request.body)
        return send_fast._after_put(broker, ctx, request, *rest)

    references = list(send_fast._COMPILED_REFERENCES)
    references[references.index(send_fast._after_put)] = after_put
    monkeypatch.setattr(send_fast, "_COMPILED_REFERENCES", tuple(references))
    escaped = props({"UNIQ_KEY": "not plain"})
    sends = [
        send(body=b"usual"),
        send(body=b"v1", code=RequestCode.SEND_MESSAGE),
        send(body=b"any queue", queue_id=-1),  # the Python code draws the queue
        send(body=b"delayed", properties=props({"DELAY": "2"})),  # a put hook's
        send(body=b"new topic", topic="NewTopic"),
        send(body=b"escaped", properties=escaped),  # put here, answered by _after_put
    ]
    answers, _, _ = await answers_and_store(tmp_path, plugin_host, sends, **free_ports())
    assert all(b'"code":0' in answer for answer in answers)
    assert deciding.answered == [b"usual", b"v1", b"escaped"]
    assert deciding.left == [b"any queue", b"delayed", b"new topic"]
    assert finished_in_python == [b"escaped"]


async def test_sends_the_fast_path_leaves_alone_answer_the_same(tmp_path, plugin_host, monkeypatch):
    answers = await assert_same(tmp_path, plugin_host, monkeypatch, general_sends)
    assert b'"code":0' not in answers[10]  # the body over the limit is refused


@pytest.mark.parametrize(
    "overrides",
    [
        {"broker_role": "SLAVE", "broker_id": 1},
        {"broker_role": "SYNC_MASTER"},
        {"broker_role": "SYNC_MASTER", "slave": True},
        {"broker_role": "SYNC_MASTER", "slave": True, "flush_disk_type": "SYNC_FLUSH"},
        {"flush_disk_type": "SYNC_FLUSH"},
        {"broker_permission": PERM_READ},
    ],
    ids=[
        "slave",
        "sync-master-alone",
        "sync-master-acked",
        "sync-master-sync-flush",
        "sync-flush",
        "not-writable",
    ],
)
async def test_broker_roles_and_flush_answer_the_same(
    tmp_path, plugin_host, monkeypatch, overrides
):
    answers = await assert_same(tmp_path, plugin_host, monkeypatch, usual_sends, **overrides)
    if overrides.get("slave"):  # every send waited for the slave's ack, then SEND_OK
        codes = {command.code for a in answers if a for command in FrameDecoder().feed(a)}
        assert codes == {ResponseCode.SUCCESS}


async def test_with_acl_the_guard_runs_and_answers_are_the_same(tmp_path, plugin_host, monkeypatch):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: producer-key\n    secretKey: producer-secret\n"
        "    defaultTopicPerm: DENY\n    topicPerms: [Orders=PUB]\n"
    )
    producer = Credentials("producer-key", "producer-secret")

    def requests() -> list[RemotingCommand]:
        allowed, denied, unsigned = send(), send(topic="Tagged"), send()
        sign(allowed, producer)
        sign(denied, producer)
        return [allowed, denied, unsigned]

    answers = await assert_same(
        tmp_path, plugin_host, monkeypatch, requests, acl_enable=True, rocketmq_home=str(home)
    )
    assert b'"code":0' in answers[0]
    assert b'"code":0' not in answers[1] and b'"code":0' not in answers[2]


async def test_the_usual_send_takes_the_fast_path_and_the_rest_do_not(tmp_path, plugin_host):
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        ours, theirs = socket.socketpair()
        with theirs:
            connection = Connection(
                await SocketStream.from_socket(ours), broker.server.processors, peer_address=PEER
            )
            ctx = connection.context
            assert type(send_fast.fast_send(broker, ctx, send())) is bytes
            for request in general_sends()[:-2]:  # the last two are usual sends
                assert send_fast.fast_send(broker, ctx, request) is None, request
            await connection.aclose()


async def test_an_acl_guard_leaves_the_fast_path_open_a_hook_that_reads_answers_closes_it():
    class Tracer:  # sees every answer: finished frames would pass it by
        def before_request(self, ctx, request):
            return None

        def after_response(self, ctx, request, response):
            pass

    guard = AclGuard(lambda: None)  # never asked here: no request is read
    for hooks, encoded in (((), True), ((guard,), True), ((guard, Tracer()), False)):
        ours, theirs = socket.socketpair()
        with theirs:
            connection = Connection(await SocketStream.from_socket(ours), hooks=hooks)
            assert connection.takes_encoded_answers is encoded, hooks
            await connection.aclose()


# extFields changes the compiled helper reads (it must agree with the Python code) and
# ones it leaves to the Python code (then it answers None)
READ_BY_BOTH = [
    {},
    {"e": "-1"},
    {"e": "2147483647", "g": "-9", "h": "-2147483648"},
    {"i": None},
    {"i": ""},
    {"i": "TAGS\x01a\x02"},
    {"i": "CLUSTER\x01mine"},
    {"i": "A\x01xCLUSTER\x01"},
    {"i": "UNIQ_KEY\x01"},
    {"i": "KEYS\x01UNIQ_KEY\x01no\x02UNIQ_KEY\x01yes"},
    {"i": "ünï\x01code"},
    {"j": "3", "l": "16"},
    {"m": "false"},
    {"m": "0"},  # the C++ client's false
    {"g": "999999999999999999"},
]
LEFT_TO_PYTHON = [
    {"a": None},
    {"b": None},
    {"c": None},
    {"d": None},
    {"d": "x"},
    {"e": "+1"},
    {"e": " 1"},
    {"e": "2147483648"},
    {"e": "1_0"},
    {"e": "-"},
    {"e": ""},
    {"f": None},
    {"g": "1000000000000000000"},
    {"h": "٣"},
    {"j": "x"},
    {"l": "2147483648"},
    {"m": "true"},
    {"m": "1"},
    {"m": "False"},
    {"i": "\ud800"},
]


def python_read(ext_fields: dict, names: tuple, cluster: str) -> tuple | None:
    """What the Python code reads, as the compiled helper gives it (properties encoded)."""
    fields = send_fast._read_fields(ext_fields, names)
    if fields is None:
        return None
    *numbers, properties, _ = fields
    encoded = send_fast.send._with_cluster(properties or "", cluster).encode()
    return (*numbers, encoded, send_fast.property_value(encoded, b"UNIQ_KEY"))


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_the_compiled_helper_reads_what_the_python_code_reads(code):
    read_send = compiled_helper().read_send
    names = send_fast._V1_NAMES if code == RequestCode.SEND_MESSAGE else send_fast._V2_NAMES
    v2_to_wire = dict(zip(send_fast._V2_NAMES, names, strict=True))
    for change in READ_BY_BOTH:
        changed = {v2_to_wire[key]: value for key, value in change.items()}
        ext_fields = send(code=code, change=changed).ext_fields
        reference = python_read(ext_fields, names, "DefaultCluster")
        assert reference is not None, change
        assert read_send(ext_fields, names, "DefaultCluster") == reference, change
    for change in LEFT_TO_PYTHON:
        changed = {v2_to_wire[key]: value for key, value in change.items()}
        ext_fields = send(code=code, change=changed).ext_fields
        assert read_send(ext_fields, names, "DefaultCluster") is None, change
    frozen = MappingProxyType(send(code=code).ext_fields)  # not a dict: the Python code's
    assert read_send(frozen, names, "DefaultCluster") is None


def test_the_compiled_answer_frame_is_the_python_one(monkeypatch):
    answer_frame = compiled_helper().answer_frame
    host = bytes([127, 0, 0, 1, 0, 0, 0x28, 0x9A])
    cases = [
        (host, 0, 0, 0, None, 1),
        (host, (1 << 63) - 1, 3, 123456789012, b"AB12", -(1 << 31)),
        (bytes(range(1, 21)), 1 << 40, 2147483647, 1, b"z9", (1 << 31) - 1),
        (host, 42, 1, 2, b"", 5),  # not plain: both give None
        (host, 42, 1, 2, b"a-b", 5),
        (host, 42, 1, 2, "ü".encode(), 5),
    ]
    for region, trace_on in (("DefaultRegion", False), ('a "quoted" región', True)):
        frame = send_fast._AnswerFrame(region, trace_on)
        for case in cases:
            monkeypatch.setattr(send_fast, "COMPILED", None)
            reference = frame(*case)
            monkeypatch.setattr(send_fast, "COMPILED", compiled_helper())
            assert frame(*case) == reference, case
            assert (reference is None) == (case[4] is not None and not case[4].isalnum())
    assert answer_frame(frame._head, frame._tail, host, 1, 2, 3, None, 4).startswith(b"\x00\x00")


# names found at the start of a record's properties, inside them, as part of another name
BATCH_PROPERTIES = st.sampled_from(
    ["", "WAIT\x01true\x02", "TAGS\x01a\x02KEYS\x01k\x02", "X\x01", "Y\x01y\x02AIT\x01z\x02"]
    + ["".join(f"K{number}\x01v\x02" for number in range(pairs)) for pairs in (64, 65)]
)
RECORD_PROPERTIES = st.sampled_from(
    [b"", b"TAGS\x01b\x02", b"KEYS\x01k", b"WAIT\x01false\x02Y", b"A\x01x\x02WAIT\x01f",
     b"A\x01WAIT\x01\x02K7\x01w\x02"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=20), RECORD_PROPERTIES),
        max_size=6,
    ),
    cut=st.one_of(st.none(), st.integers(0, 200)),
    garbage=st.sampled_from([b"", b"\x00", b"\xff" * 20, b"\x00\x00\x00\x16" + b"\x00" * 18]),
    batch_properties=BATCH_PROPERTIES,
    most=st.sampled_from([1, 3, 1000]),
)
def test_the_compiled_batch_reader_makes_the_python_codes_messages_and_refusals(
    records, cut, garbage, batch_properties, most
):
    body = encode_batch([BatchItem(flag, data, properties) for flag, data, properties in records])
    body = (body if cut is None else body[:cut]) + garbage
    header = SendMessageRequestHeader(
        producer_group="PG", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=1, sys_flag=0, born_timestamp=1700000000000, flag=0, reconsume_times=2,
    )  # fmt: skip
    config = broker_config(Path("."), max_batch_message_count=most)
    host = b"\x7f\x00\x00\x01\x00\x00\x9c\x40"

    def made(helper):
        original = send_fast.COMPILED
        send_fast.COMPILED = helper
        try:
            return send_fast.send._batch_messages(
                body, header, "T", 1, 0, host, batch_properties, config
            )
        except RequestRefused as refused:
            return (refused.code, refused.remark)
        finally:
            send_fast.COMPILED = original

    assert made(compiled_helper()) == made(None)
    level = send_fast.send._batch_level_pairs(batch_properties.encode())
    if cut is None and not garbage and 0 < len(records) <= most and len(level) <= 64:
        # a body the compiled path reads itself (more batch-level pairs: the Python code)
        direct = compiled_helper().batch_messages(
            body, "T", 1, 0, 1700000000000, host, 2, level, most, MessageToStore
        )
        assert direct == made(None)
