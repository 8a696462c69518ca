"""rocketmq_rpc_latency: how long the broker takes over each request, by code and answer.

Timed around the processor (``ProcessorTable.wrap``), not by an RPC hook: a hook would
see every response but would also turn off the send fast path, which answers with a
finished frame only on connections without hooks. So the time is from the processor's
call to its answer (an awaited answer included), without the write to the socket, and
only while an exporter is on. Sends answered in runs before decoding (the broker's
FrameServer) are told here per run (``observe_run``): each counted, SEND_OK, with the
run's time shared out.

Two clock reads and the counting cost about a microsecond here, ~5% of a send; so the
message requests (sends, pulls, pops and acks: ``SAMPLED_CODES``) are timed one in
``SAMPLE_EVERY``, each timed one counting for ``SAMPLE_EVERY`` (the count and the sum
estimate all of them); every other request is timed.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from inspect import isawaitable
from time import perf_counter
from typing import Any

from ..protocol.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..remoting.connection import LaterAnswer
from .histograms import RPC_LATENCY_BOUNDS, BucketCounts, HistogramSeries

_SUCCESS = int(ResponseCode.SUCCESS)
SAMPLE_EVERY = 16
SAMPLED_CODES = frozenset(
    int(code)
    for code in (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2,
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.BATCH_ACK_MESSAGE,
    )
)


class RpcLatency:
    """The latency counts, keyed by (request code, response code, oneway)."""

    def __init__(self) -> None:
        self.counts = BucketCounts(RPC_LATENCY_BOUNDS)
        self.series = HistogramSeries(
            "rocketmq_rpc_latency", "Rpc latency", "ms", self.counts, rpc_labels
        )

    def observe_run(self, code: int, requests: int, seconds: float) -> None:
        """A run of ``requests`` answered before decoding (a FrameServer's) in ``seconds``:
        each counted with the run's time shared out, all SEND_OK."""
        self.counts.add((code, _SUCCESS, False), seconds * 1000.0 / requests, requests)

    def timed(self, processor: Any) -> Any:
        """``processor`` with its calls timed into these counts."""
        counts = self.counts
        skipped = 0  # message requests to leave untimed before the next timed one

        async def answered(
            started: float, request: RemotingCommand, pending: Any, weight: int
        ) -> Any:
            response = await pending
            _count(counts, started, request, response, weight)
            return response

        def timed_processor(ctx: Any, request: RemotingCommand) -> Any:
            nonlocal skipped
            weight = 1
            if request.code in SAMPLED_CODES:
                if skipped:
                    skipped -= 1
                    return processor(ctx, request)
                skipped, weight = SAMPLE_EVERY - 1, SAMPLE_EVERY
            started = perf_counter()
            result = processor(ctx, request)
            kind = type(result)
            if kind is LaterAnswer:  # answered by a callback: timed to that answer
                result.observer = partial(_count, counts, started, request, weight=weight)
                return result
            if (
                kind is bytes
                or kind is RemotingCommand
                or result is None
                or not isawaitable(result)
            ):
                _count(counts, started, request, result, weight)
                return result
            return answered(started, request, result, weight)

        return timed_processor


def _count(
    counts: BucketCounts, started: float, request: RemotingCommand, response: Any, weight: int
) -> None:
    # a processor answers with a finished frame (bytes) only for a stored message
    code = response.code if isinstance(response, RemotingCommand) else _SUCCESS
    oneway = bool(request.flag & FLAG_ONEWAY) or response is None
    counts.add((request.code, code, oneway), (perf_counter() - started) * 1000.0, weight)


def rpc_labels(key: tuple[int, int, bool]) -> Mapping[str, str]:
    request_code, response_code, oneway = key
    return {
        "protocol_type": "remoting",
        "request_code": code_name(RequestCode, request_code),
        "response_code": code_name(ResponseCode, response_code),
        "is_long_polling": "false",
        "result": "oneway" if oneway else "success",
    }


def code_name(codes: Any, code: int) -> str:
    """A code as RocketMQ 5 writes it in a label: its constant's name lower-cased, or the
    number when it has none."""
    try:
        return str(codes(code).name.lower())
    except ValueError:
        return str(code)
