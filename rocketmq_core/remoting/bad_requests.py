"""What peers get wrong, logged at a bounded rate: a line per peer per window, with a count.

A client that sends 100,000 malformed frames must not write 100,000 log lines (nor
tracebacks): the first bad request from a host is logged at once, the next ones in the
same window are counted, and the count is logged with the last of them when the window
has passed. An exception no request should cause (a bug of ours) keeps its traceback,
at most one per processor per window, the others counted the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.codes import RequestCode

WINDOW_SECONDS = 10.0
# hosts remembered at once; beyond this, those whose window has passed are forgotten (their
# counts logged), and while all are within their window newcomers are counted together
MAX_TRACKED = 1024
OTHERS = "other hosts"
REMARK_CHARACTERS = 200


@dataclass(slots=True)
class _Tally:
    since: float
    count: int = 0  # not logged yet
    last: str = ""


class BadRequestLog:
    """Rate-limited logging of bad requests (per peer host) and of processor failures."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._window = window
        self._clock = clock
        self._peers: dict[str, _Tally] = {}
        self._failures: dict[str, _Tally] = {}

    def bad_request(self, peer: str, code: int, error: BaseException) -> None:
        """A request the peer got wrong; it was answered with the error's code."""
        what = f"{_request_name(code)}: {_short(error)}"
        if self._first_in_window(self._peers, _host(peer), what, peer):
            self._log.warning("bad request from %s: %s", peer, what)

    def bad_stream(self, peer: str, error: BaseException) -> None:
        """Bytes that are not a frame: the connection is closed."""
        what = f"connection closed: {_short(error)}"
        if self._first_in_window(self._peers, _host(peer), what, peer):
            self._log.warning("closing connection from %s: %s", peer, _short(error))

    def failure(self, processor: str, code: int, error: BaseException) -> None:
        """An exception no request should cause: a traceback, rate-limited."""
        what = f"{_request_name(code)}: {type(error).__name__}: {_short(error)}"
        if self._first_in_window(self._failures, processor, what, processor):
            self._log.error("processor %s failed on %s", processor, what, exc_info=error)

    def _first_in_window(self, tallies: dict[str, _Tally], key: str, what: str, who: str) -> bool:
        """Count ``what``; True when it opens a new window (log it), after logging the
        count of the window before."""
        now = self._clock()
        tally = tallies.get(key)
        if tally is None and len(tallies) >= MAX_TRACKED:
            self._forget_stale(tallies, now)
            if len(tallies) >= MAX_TRACKED:  # all in their window: count it with the rest
                key = who = OTHERS
                tally = tallies.get(key)
        if tally is not None and now - tally.since < self._window:
            tally.count += 1
            tally.last = what
            return False
        if tally is not None:
            self._log_count(tallies, tally, who, now)
            del tallies[key]  # re-added last: the dict stays ordered by window start
        tallies[key] = _Tally(now)
        return True

    def _forget_stale(self, tallies: dict[str, _Tally], now: float) -> None:
        """Drop the tallies whose window has passed, oldest first, logging their counts."""
        while tallies:
            oldest = next(iter(tallies))
            tally = tallies[oldest]
            if now - tally.since < self._window:
                return
            del tallies[oldest]
            self._log_count(tallies, tally, oldest, now)

    def _log_count(self, tallies: dict[str, _Tally], tally: _Tally, who: str, now: float) -> None:
        if tally.count:
            kind = "failures of" if tallies is self._failures else "bad requests from"
            self._log.warning(
                "%d more %s %s in the last %.0f s, last: %s",
                tally.count,
                kind,
                who,
                now - tally.since,
                tally.last,
            )


def _host(peer: str) -> str:
    # a client that reconnects comes from a new port: count it as the same peer
    return peer.rsplit(":", 1)[0]


def _short(error: BaseException) -> str:
    text = str(error)
    if len(text) > REMARK_CHARACTERS:
        return f"{text[:REMARK_CHARACTERS]}... ({len(text)} characters)"
    return text


def _request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"
