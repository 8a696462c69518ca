"""The usual send, answered without the objects of the general path.

A single message to an existing, writable, plain topic, uncompressed, that no put
hook acts on, from a connection without RPC hooks: its header fields are read from
extFields as they are (no header object) and its answer leaves as a finished frame
(no response command, no JSON encoding). Anything else, and any field the general
path would refuse, goes to ``send.send_message``, which gives the same answers and
the errors; tests/broker/test_send_fast_path.py holds the two to the same bytes.

Reading the fields and building the answer frame are done by a compiled helper
(_send_fast.c) where it is built, for their canonical forms; the Python code here is
its reference and does the rest, and all of it without a C compiler.
"""

from __future__ import annotations

import functools
import os
import struct
from types import ModuleType
from typing import TYPE_CHECKING

import orjson

from ...protocol.codes import FLAG_RESPONSE, OUR_VERSION, RequestCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.constants import PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC
from ...protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from ...protocol.message import COMPRESSED, MULTI_TAGS, property_value
from ...protocol.topic_validation import send_forbidden, topic_problem
from ...store.api import MessageToStore, PutResult, PutStatus
from ..put_hooks import PutHooks
from . import send

compiled: ModuleType | None
try:  # built by setup.py where a C compiler is; the Python code below does the same work
    from . import _send_fast as compiled
except ImportError:
    compiled = None

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker

# ROCKETMQ_SEND_FAST_PATH=0 sends every message the general way (to compare the two)
ENABLED = os.environ.get("ROCKETMQ_SEND_FAST_PATH", "1") != "0"
# the compiled helper when built; ROCKETMQ_SEND_FAST_COMPILED=0 runs the Python code instead
COMPILED = compiled if os.environ.get("ROCKETMQ_SEND_FAST_COMPILED", "1") != "0" else None

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_PREFIX = struct.Struct(">II")
_OFFSET = struct.Struct(">q")


def _wire_names(names: dict[str, str] | None) -> tuple[str, ...]:
    """The extFields keys of the header fields the fast path reads, in a fixed order."""
    return tuple(
        (names or {}).get(attribute, SendMessageRequestHeader.wire_name(attribute))
        for attribute in (
            "producer_group",
            "topic",
            "default_topic",
            "default_topic_queue_nums",
            "queue_id",
            "sys_flag",
            "born_timestamp",
            "flag",
            "properties",
            "reconsume_times",
            "max_reconsume_times",
            "batch",
        )
    )


_V1_NAMES = _wire_names(None)
_V2_NAMES = _wire_names(dict(SEND_V2_NAMES))


def send_message(broker: Broker, ctx: RequestContext, request: RemotingCommand) -> send.SendAnswer:
    """SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE: the fast path when it applies."""
    if ENABLED:
        answer: send.SendAnswer | None = None
        if COMPILED is not None:  # None: not the usual send, which the Python code reads
            answer = COMPILED.send_one(broker, ctx, request, _COMPILED_REFERENCES)
        if answer is None:
            answer = fast_send(broker, ctx, request)
        if answer is not None:
            return answer
    return send.send_message(broker, ctx, request)


def fast_send(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> send.SendAnswer | None:
    """The answer to a usual send, or None (nothing done) when the general path must."""
    config = broker.config
    if not broker.ready or not config.broker_permission & PERM_WRITE or config.is_slave:
        return None
    names = _V1_NAMES if request.code == RequestCode.SEND_MESSAGE else _V2_NAMES
    cluster = config.broker_cluster_name
    fields = None
    if COMPILED is not None:  # None: not the canonical form, which the Python code reads
        fields = COMPILED.read_send(request.ext_fields, names, cluster)
    if fields is None:
        fields = _read_fields(request.ext_fields, names)
        if fields is None:
            return None
    topic, queue_id, sys_flag, born_timestamp, flag, reconsume_times, properties, uniq = fields
    topic_config = broker.topics.get(topic)
    if topic_config is None or not topic_config.perm & PERM_WRITE or not _plain_topic(topic):
        return None
    body = request.body
    if sys_flag & COMPRESSED or len(body) > config.max_message_size:
        return None
    if type(properties) is bytes:  # the compiled helper encoded them and read UNIQ_KEY
        encoded = properties
    else:
        encoded = send._with_cluster(properties or "", cluster).encode()
        uniq = property_value(encoded, b"UNIQ_KEY")
    if broker.put_hooks.act_on(encoded):
        return None
    if queue_id < 0:  # the last check before the put: a random queue is drawn once
        queue_id = broker.random_queue(topic_config.write_queue_nums)
    if queue_id >= max(topic_config.read_queue_nums, topic_config.write_queue_nums):
        return None
    if topic_config.topic_filter_type == "MULTI_TAG":
        sys_flag |= MULTI_TAGS
    message = MessageToStore(
        topic,
        queue_id,
        body if type(body) is bytes else bytes(body),
        encoded,
        flag,
        sys_flag,
        born_timestamp,
        send._born_host(ctx.peer_address),
        reconsume_times,
    )
    result = broker.store.append(message)
    broker.stats.count_put(message, result)
    ha = broker.ha
    replica_end = ha.after_append(result, encoded) if ha is not None else -1
    return _after_put(broker, ctx, request, queue_id, uniq, result, replica_end)


def _after_put(
    broker: Broker,
    ctx: RequestContext,
    request: RemotingCommand,
    queue_id: int,
    uniq: bytes | None,
    result: PutResult,
    replica_end: int,
) -> send.SendAnswer:
    """The answer to a put send: once flushed, once a slave has it, or now."""
    if result.flush_to >= 0 or replica_end >= 0:  # the frame is built once they are done
        answer = functools.partial(_answer, broker, ctx, request, queue_id, uniq)
        return send.answer_when_settled(broker, ctx, request, result, replica_end, answer)
    return _answer(broker, ctx, request, queue_id, uniq, result)


def _answer(
    broker: Broker,
    ctx: RequestContext,
    request: RemotingCommand,
    queue_id: int,
    uniq: bytes | None,
    result: PutResult,
) -> RemotingCommand | bytes:
    """The answer frame of a stored send; a command where the frame does not apply."""
    if (
        result.status is not PutStatus.PUT_OK
        or request.serialize_type != 0  # JSON: a ROCKETMQ-header answer is built as usual
        or not ctx.connection.takes_encoded_answers
    ):
        return send._answer(broker, request, queue_id, uniq, None, result)
    config = broker.config
    frame = _answer_frame(config.region_id, config.trace_on)
    answer = frame(result.store_host, result.commit_log_offset, queue_id, result.queue_offset,
                   uniq, request.opaque)  # fmt: skip
    if answer is None:  # a UNIQ_KEY that JSON escapes
        return send._answer(broker, request, queue_id, uniq, None, result)
    return answer


def _read_fields(
    ext_fields: dict[str, str], names: tuple[str, ...]
) -> tuple[str, int, int, int, int, int, str | None, None] | None:
    """topic, queue id, sys flag, born timestamp, flag, reconsume times, the properties
    text and a None (its UNIQ_KEY, read once it is encoded) of a single send; None when
    the general path must read them (a field missing or one it would refuse)."""
    get = ext_fields.get
    (group, topic, default_topic, default_queues, queue_text, sys_text, born_text, flag_text,
     properties, reconsume_text, max_reconsume_text, batch) = map(get, names)  # fmt: skip
    if group is None or topic is None or default_topic is None or default_queues is None:
        return None
    if batch is not None and (batch == "1" or batch.lower() == "true"):
        return None
    try:  # read as the header codec reads them; whatever it would refuse goes its way
        queue_id = _int(queue_text, _INT32)
        sys_flag = _int(sys_text, _INT32)
        born_timestamp = _int(born_text, _INT64)
        flag = _int(flag_text, _INT32)
        _int(default_queues, _INT32)
        reconsume_times = 0 if reconsume_text is None else _int(reconsume_text, _INT32)
        if max_reconsume_text is not None:
            _int(max_reconsume_text, _INT32)
    except (TypeError, ValueError):
        return None
    return topic, queue_id, sys_flag, born_timestamp, flag, reconsume_times, properties, None


def _int(text: str | None, bounds: tuple[int, int]) -> int:
    value = int(text)  # type: ignore[arg-type]  # None: TypeError, as a missing field
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(text)
    return value


@functools.lru_cache(maxsize=4096)
def _plain_topic(topic: str) -> bool:
    """A valid topic a producer may send to, with no special handling on the way."""
    return (
        topic_problem(topic) is None
        and not send_forbidden(topic)
        and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        and topic != TIMER_TOPIC
    )


def _plain_text(value: bytes) -> bool:
    """Text that JSON carries as it is (a UNIQ_KEY is hex): no escaping to work out."""
    return value.isalnum() and value.isascii()


class _AnswerFrame:
    """A send's SUCCESS answer frame, built from the bytes around its five values: the
    very bytes ``send._answer`` and the connection's JSON encoding give."""

    __slots__ = ("_head", "_tail", "_uniq_head", "_uniq_tail")

    def __init__(self, region_id: str, trace_on: bool) -> None:
        sentinels = ("\x10", "\x11", "\x12", "\x13", "\x14")
        self._head, self._tail = self._template(region_id, trace_on, sentinels, None)
        self._uniq_head, self._uniq_tail = self._template(region_id, trace_on, sentinels, "\x15")

    @property
    def template(self) -> tuple[tuple[bytes, ...], bytes, tuple[bytes, ...], bytes]:
        """(head, tail, uniq head, uniq tail): what the compiled runs build frames from."""
        return self._head, self._tail, self._uniq_head, self._uniq_tail

    @staticmethod
    def _template(
        region_id: str, trace_on: bool, sentinels: tuple[str, ...], uniq: str | None
    ) -> tuple[tuple[bytes, ...], bytes]:
        fields = send._answer_template(region_id, trace_on).copy()
        fields[send._MSG_ID], fields[send._QUEUE_ID], fields[send._QUEUE_OFFSET] = sentinels[:3]
        if uniq is not None:
            fields[send._TRANSACTION_ID] = uniq
        header = {
            "code": ResponseCode.SUCCESS,
            "extFields": fields,
            "flag": FLAG_RESPONSE,
            "language": "JAVA",
            "opaque": sentinels[3],
            "version": OUR_VERSION,
        }
        text = orjson.dumps(header)
        markers = [orjson.dumps(sentinel)[1:-1] for sentinel in sentinels[:3]]
        markers.append(orjson.dumps(sentinels[3]))  # the opaque is a number: no quotes
        if uniq is not None:
            markers.insert(3, orjson.dumps(uniq)[1:-1])
        parts = []
        for marker in markers:
            before, found, text = text.partition(marker)
            if not found or marker in text:
                raise ValueError(f"answer template: {marker!r} not found once")
            parts.append(before)
        return tuple(parts), text

    def __call__(
        self,
        store_host: bytes,
        commit_log_offset: int,
        queue_id: int,
        queue_offset: int,
        uniq: bytes | None,
        opaque: int,
    ) -> bytes | None:
        """The frame; None when ``uniq`` is not plain text (``send._answer`` escapes it)."""
        if COMPILED is not None:
            parts = self._head if uniq is None else self._uniq_head
            tail = self._tail if uniq is None else self._uniq_tail
            return COMPILED.answer_frame(parts, tail, store_host, commit_log_offset, queue_id,
                                         queue_offset, uniq, opaque)  # fmt: skip
        if uniq is not None and not _plain_text(uniq):
            return None
        msg_id = (store_host + _OFFSET.pack(commit_log_offset)).hex().upper().encode()
        if uniq is None:
            first, second, third, fourth = self._head
            header = b"".join(
                (first, msg_id, second, b"%d" % queue_id, third, b"%d" % queue_offset,
                 fourth, b"%d" % opaque, self._tail)
            )  # fmt: skip
        else:
            first, second, third, fourth, fifth = self._uniq_head
            header = b"".join(
                (first, msg_id, second, b"%d" % queue_id, third, b"%d" % queue_offset,
                 fourth, uniq, fifth, b"%d" % opaque, self._uniq_tail)
            )  # fmt: skip
        return _PREFIX.pack(len(header) + 4, len(header)) + header


@functools.lru_cache(maxsize=8)
def _answer_frame(region_id: str, trace_on: bool) -> _AnswerFrame:
    return _AnswerFrame(region_id, trace_on)


# what the compiled send_one calls and compares with (_send_fast.c names each), taken
# once: a test that replaces one of these functions must replace it here too
_COMPILED_REFERENCES = (
    MessageToStore,
    PutStatus.PUT_OK,
    _plain_topic,
    _answer_frame,
    send._born_host,
    _after_put,
    _V1_NAMES,
    _V2_NAMES,
    PutHooks,
)
