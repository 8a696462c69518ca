"""Runs of usual sends, answered from the bytes a connection read, before decoding.

A producer with many sends in flight hands the broker chunks of many SEND_MESSAGE(_V2)
frames. Decoded, each would cost a header dict, a command, the processor's calls and the
answer's queueing in Python, about two thirds of what a send costs the broker. So each
chunk goes first to ``SendFrames``, the broker's FrameServer (remoting/processor.py): the
compiled ``serve_sends`` (_send_fast.c) reads the leading frames in place, and answers
every one that send_fast's fast path would take, as it would (the same checks, the same
put through the store's compiled ``usual_append``, the same answer frame, the same
counts), then stops before the first frame it would not take. The decoder decodes that
frame and the rest of the chunk, and the processors answer them as ever: the order of
the requests is the order of their puts. A usual SEND_BATCH_MESSAGE is taken the same
way: its records made as send._batch_messages makes them, put through the store's
``usual_append_batch``, and answered with each record's message id, as send._answer does.

It serves only where nothing else must see the sends: a writable master (a SYNC_MASTER
answers a run once a slave acks its end), a store whose puts do not wait for a flush, no
RPC hook but the ACL guard, and only the frames of clients' canonical form (send_fast's),
with ASCII headers. With ACL on, a run serves the frames the guard's compiled check would
certainly allow (signed right, a verdict kept as allowed: AclValidator.frame_check), and
leaves the first other one to the guard. tests/broker/test_send_frames*.py hold its
answers, stored bytes and counts to the general path's. ROCKETMQ_SEND_FRAMES=0 turns it
off (to compare).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING

from ...errors import RemoteProtocolError
from ...protocol.codes import RequestCode
from ...protocol.command import RemotingCommand
from ...protocol.constants import PERM_WRITE
from ...protocol.message import HOST_V4_SIZE
from ...store.api import MessageToStore, PutStatus
from ..put_hooks import PutHooks
from . import send, send_fast

if TYPE_CHECKING:
    from ...remoting.connection import Connection
    from ...remoting.processor import ProcessorTable
    from ..app import Broker

log = logging.getLogger("rocketmq.broker")

ENABLED = os.environ.get("ROCKETMQ_SEND_FRAMES", "1") != "0"
TOPIC_NAMES_MOST = 4096  # names of topics learned; forgotten all at once beyond this
# the fields each code reads: SEND_MESSAGE's (the C++ client's), then SEND_MESSAGE_V2's
_NAMES = tuple(name.encode() for name in (*send_fast._V1_NAMES, *send_fast._V2_NAMES))
_FRAME_PREFIX = struct.Struct(">II")
_LENGTH = struct.Struct(">I")
_SUCCESS_HEAD = b'{"code":0,'
_MSG_ID = b'"msgId":"'
# the request a run's waiting answers stand for (Connection.answer_later): one that is
# not oneway, which is all the connection reads of it
_RUN = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
_TIMEOUT = PutStatus.FLUSH_SLAVE_TIMEOUT
_SINGLE_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
RUN_FIELDS = 17  # the run tuple's fields (_run), as _send_fast.c's serve_sends reads them
_KEPT_RUN = "send_frames.run"  # RequestContext attribute: (what it is made of, the run)


def _frames(answers: bytes) -> list[bytes]:
    """Answer frames written one after another, apart (they have no body)."""
    frames: list[bytes] = []
    position = 0
    while position < len(answers):
        (length,) = _LENGTH.unpack_from(answers, position)
        frames.append(answers[position : position + 4 + length])
        position += 4 + length
    return frames


def _answers_by_end(answers: bytes, end: int) -> list[tuple[int, bytes]]:
    """A run's answer frames, each with where its send's records end: where the next
    one's begin (a run's puts are back to back: its first message id says where; a
    batch's answer names each of its records), ``end`` for the last."""
    frames = _frames(answers)
    starts: list[int] = []
    for frame in frames:
        at = frame.index(_MSG_ID) + len(_MSG_ID)
        first_id = frame[at : frame.index(b'"', at)].split(b",", 1)[0]
        starts.append(int(first_id[-16:], 16))  # after the store host: the offset
    return list(zip([*starts[1:], end], frames, strict=True))


def _with_status(answers: bytes, status: PutStatus) -> bytes:
    """SEND_OK answer frames as answers with a stored message's other status: the same
    frames with another code, as send._answer makes them (no remark). A run's answers
    begin so (checked in ``_run``)."""
    head = b'{"code":%d,' % status.response_code
    restated: list[bytes] = []
    for frame in _frames(answers):
        header = head + frame[8 + len(_SUCCESS_HEAD) :]
        restated += (_FRAME_PREFIX.pack(len(header) + 4, len(header)), header)
    return b"".join(restated)


class SendFrames:
    """The FrameServer of a broker whose sends are send_fast's."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # a send's topic as the header has it -> its name, or None for a topic the fast
        # path leaves (send_fast._plain_topic): what a name is does not change
        self._topic_names: dict[bytes, str | None] = {}
        self.served = 0  # sends answered by runs (a batch is one)
        self.observer: Callable[[int, int, float], None] | None = None  # FrameServer's
        self.takes_batches = False  # SEND_BATCH_MESSAGE frames too (for_table)

    @classmethod
    def for_table(cls, broker: Broker, table: ProcessorTable) -> SendFrames | None:
        """One for ``table`` when its SEND_MESSAGE and SEND_MESSAGE_V2 processor is
        send_fast's, bound to ``broker``, and the compiled helper is built; else None. It
        takes batches too where SEND_BATCH_MESSAGE's processor is that one as well."""
        if getattr(send_fast.compiled, "RUN_FIELDS", None) != RUN_FIELDS:  # not built, or stale
            return None

        def answered_by_send_fast(code: RequestCode) -> bool:
            route = table.lookup(code)
            processor = route.processor if route is not None else None
            return (
                route is not None
                and route.limit is None  # its SYSTEM_BUSY answers are the dispatch's
                and getattr(processor, "func", None) is send_fast.send_message
                and getattr(processor, "args", None) == (broker,)
            )

        if not all(map(answered_by_send_fast, _SINGLE_CODES)):
            return None
        frames = cls(broker)
        frames.takes_batches = answered_by_send_fast(RequestCode.SEND_BATCH_MESSAGE)
        return frames

    def __call__(self, connection: Connection, source: bytes | bytearray, position: int) -> int:
        run = self._run(connection)
        if run is None:
            return position
        serve_sends = send_fast.compiled.serve_sends  # type: ignore[union-attr]
        waits_for_slave = self.broker.config.broker_role == "SYNC_MASTER"
        observer = self.observer
        stored = False
        while True:
            started = perf_counter() if observer is not None else 0.0
            try:
                (position, answers, counts, missed, failure, declined, served_v1,
                 served_batch_code, batches) = serve_sends(run, source, position)  # fmt: skip
            except Exception as exc:  # not a send's: the broker's own (out of memory)
                log.exception("answering sends from %s failed", connection.peer_address)
                raise RemoteProtocolError(f"the broker failed to answer sends: {exc}") from exc
            if answers is not None:
                if waits_for_slave:
                    self._answer_when_replicated(connection, answers)
                else:
                    connection.queue_answers(answers)
                stored = True
                served = 0  # requests: each single send, each batch
                if counts is not None:
                    self.broker.stats.count_put_runs(counts)
                    served += sum(counts.values())
                if batches is not None:  # of any code (the C++ client's are SEND_MESSAGE)
                    self.broker.stats.count_put_batches(batches)
                    served += len(batches)
                self.served += served
                if observer is not None:  # the run's time, shared by its requests
                    by_code = (
                        (RequestCode.SEND_MESSAGE, served_v1),
                        (RequestCode.SEND_BATCH_MESSAGE, served_batch_code),
                        (RequestCode.SEND_MESSAGE_V2, served - served_v1 - served_batch_code),
                    )
                    seconds = (perf_counter() - started) / served
                    for code, requests in by_code:
                        if requests:
                            observer(code, requests, seconds * requests)
            if failure is not None:  # its put raised: answered as a processor's error
                error, header_start, header_end = failure
                connection.answer_failed(source[header_start:header_end], error)
                stored = True
                continue
            if declined >= 0:  # the store's first put to a queue or file: the usual way
                connection.dispatch_frame(source[declined:position])
                continue
            if missed is None:
                break
            self._learn(missed)
        ha = self.broker.ha
        if stored and ha is not None:
            ha.appended()
        return position

    def _answer_when_replicated(self, connection: Connection, answers: bytes) -> None:
        """A SYNC_MASTER's answers to a run, each as its send's own wait would answer it
        (HA.md §3), with one wait for the run: SEND_OK once a slave acks the run's end;
        at slaveTimeout, SEND_OK for the sends the slave acked and FLUSH_SLAVE_TIMEOUT for
        the rest; SLAVE_NOT_AVAILABLE for the sends too far ahead of the slave, at once."""
        ha = self.broker.ha
        assert ha is not None  # a SYNC_MASTER has one
        end = self.broker.store.max_commit_log_offset  # the run's last put ends here
        status = ha.check(end)
        if status is PutStatus.PUT_OK:
            connection.queue_answers(answers)
            return
        if status is None:  # the usual case: every send is acked, or waits for the slave
            self._wait(connection, answers, end)
            return
        # the run's end is too far ahead of the slave: its first sends may still wait
        now: list[bytes] = []
        waiting: list[tuple[int, bytes]] = []
        for send_end, frame in _answers_by_end(answers, end):
            status = ha.check(send_end)
            if status is None:
                waiting.append((send_end, frame))
            else:
                now.append(frame if status is PutStatus.PUT_OK else _with_status(frame, status))
        connection.queue_answers(b"".join(now))
        if waiting:
            self._wait(connection, b"".join(frame for _, frame in waiting), waiting[-1][0])

    def _wait(self, connection: Connection, answers: bytes, end: int) -> None:
        """``answers`` (of sends ending at ``end`` at the latest) once a slave acks ``end``;
        at slaveTimeout, each as far as the slave got."""
        ha = self.broker.ha
        assert ha is not None
        later = connection.answer_later(_RUN)

        def replicated(acked: bool) -> None:
            if acked:
                later.answer(answers)
                return
            acked_to = ha.progress.acked  # the sends the slave has are SEND_OK
            later.answer(
                b"".join(
                    frame if send_end <= acked_to else _with_status(frame, _TIMEOUT)
                    for send_end, frame in _answers_by_end(answers, end)
                )
            )

        try:
            ha.when_replicated(end, replicated)
        except BaseException:
            later.withdraw()
            raise

    def _run(self, connection: Connection) -> tuple | None:
        """What serve_sends reads, as _send_fast.c names it; None when no send of this
        connection may be answered here now (send_fast.fast_send's first checks). Kept
        on the connection while everything it is made of stays the same: a chunk of one
        send (a producer sending one at a time) would otherwise pay ~3 us to make it."""
        broker = self.broker
        config = broker.config
        if (
            not ENABLED
            or not send_fast.ENABLED  # the fast path off (to compare): so are its runs
            or send_fast.COMPILED is None
            or not broker.ready
            or not config.broker_permission & PERM_WRITE
            or config.is_slave
        ):
            return None
        hooks = broker.put_hooks
        sync = config.broker_role == "SYNC_MASTER"
        if sync:
            if self.observer is not None:  # a timed send ends with the slave's ack: not here
                return None
            ha = broker.ha
            end = broker.store.max_commit_log_offset
            if ha is None or ha.check(end) is PutStatus.SLAVE_NOT_AVAILABLE:
                return None  # no slave to wait for: each send's SLAVE_NOT_AVAILABLE is theirs
        checks = connection.frame_checks()  # the ACL guard's, when ACL is on
        if len(checks) > 1 or None in checks:
            return None  # a hook the runs cannot check for now: it sees each request
        store = broker.store
        usual_append = getattr(store, "usual_append", None)
        append = usual_append() if usual_append is not None else None
        if append is None:
            return None
        usual_append_batch = getattr(store, "usual_append_batch", None)
        append_batch = (
            usual_append_batch() if usual_append_batch is not None and self.takes_batches else None
        )
        made_of = (
            hooks, getattr(hooks, "markers", None), sync, checks, append, append_batch,
            broker.topics.table, config.region_id, config.trace_on, config.broker_cluster_name,
            config.max_message_size, config.max_batch_message_count,
        )  # fmt: skip
        kept = connection.context.attributes.get(_KEPT_RUN)
        if kept is not None and kept[0] == made_of:
            return kept[1]
        run = self._made_run(connection, made_of)
        connection.context.attributes[_KEPT_RUN] = (made_of, run)
        return run

    def _made_run(self, connection: Connection, made_of: tuple) -> tuple | None:
        """The run tuple of ``_run``'s values (``made_of``), or None."""
        hooks, markers, sync, checks, append, append_batch, table = made_of[:7]
        if type(hooks) is not PutHooks:
            markers = None
        if markers is None or not all(type(marker) is bytes for marker in markers):
            return None  # a hook that may act on any message
        if any(b"\x02" in marker for marker in markers):
            return None  # found across two records' properties in a batch: the general path's
        born_host = send._born_host(connection.context.peer_address)
        if len(born_host) != HOST_V4_SIZE:  # an IPv6 peer: the general path
            return None
        config = self.broker.config
        answer = send_fast._answer_frame(config.region_id, config.trace_on)
        if not answer.template[0][0].startswith(_SUCCESS_HEAD + b'"extFields":{' + _MSG_ID):
            return None  # not the answers _with_status and _answers_by_end read
        return (
            connection.max_frame_length,
            _NAMES,
            config.broker_cluster_name.encode(),
            config.max_message_size,
            markers,
            self._topic_names,
            table,
            born_host,
            MessageToStore,
            append,
            PutStatus.PUT_OK,
            answer.template,
            self.broker.stats.fixed_record_size(HOST_V4_SIZE),
            append_batch,
            config.max_batch_message_count,
            checks[0] if checks else None,
            sync,  # a send that does not wait for the slave: the usual way (store.rules)
        )

    def _learn(self, topic: bytes) -> None:
        if len(self._topic_names) >= TOPIC_NAMES_MOST:
            self._topic_names.clear()
        try:
            name: str | None = topic.decode("ascii")
        except UnicodeDecodeError:
            name = None  # not a valid topic name: the general path says why
        if name is not None and not send_fast._plain_topic(name):
            name = None
        self._topic_names[topic] = name
