"""grpcio's own threads at a low CPU priority, so that they stop preempting the event loop.

grpcio does a call's socket work in threads of its C core (its event engine's pool), and
the event loop's thread and those threads wake each other several times a call. At the
loop's priority each wake-up preempts the loop where they share a core: a context switch
a hop. At nice 15 the scheduler leaves them waiting until the loop waits or its slice
ends, and they then take the work of several calls at once. A null MessagingService on
one core: ~190 us of CPU a SendMessage at the loop's priority, ~120 us at nice 15 or 19,
~150 us at 10 (docs/perf.md, "gRPC's threads").

The price is on a core the event loop keeps busy: there they get a small share of it
(a weight of 36 against the loop's 1024), and gRPC calls slow down before remoting ones
do. Where a core has time to spare, nothing changes.

Linux only: there a nice value is a thread's own (elsewhere it would be the whole
process's). The value only ever lowers a thread's priority: a thread already at it or
below (a process started with ``nice -n 19``) is left as it is, even where the process
could raise it (root, CAP_SYS_NICE). ``ROCKETMQ_GRPC_THREAD_NICE`` sets another value
(1-19); 0 leaves the threads alone.

Threads are told apart by the names grpc's core gives them. A new thread names itself
only once it runs, and grpc's pool grows under load: the threads are looked at again
every second, in a background thread (``rocketmq_core.background``), never on the loop.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio

from rocketmq_core.background import run_in_background

log = logging.getLogger("rocketmq.proxy")

NICE = 15  # as low as helps (15 and 19 measure the same), and a little more share than 19
# the names grpc's core gives its threads (a Linux thread name keeps 15 bytes)
GRPC_THREAD_NAMES = frozenset({b"event_engine", b"lifeguard", b"grpc_global_tim"})
RESCAN_S = 1.0
_TASKS = "/proc/self/task"


def wanted_nice() -> int:
    """The nice value for grpc's threads: ROCKETMQ_GRPC_THREAD_NICE, else NICE; 0 is off."""
    text = os.environ.get("ROCKETMQ_GRPC_THREAD_NICE", "").strip()
    if not text:
        return NICE
    try:
        value = int(text)
    except ValueError:
        log.warning("ROCKETMQ_GRPC_THREAD_NICE=%r is not a number: using %d", text, NICE)
        return NICE
    return min(max(value, 0), 19)  # 19 is the lowest priority there is; below 1: off


class GrpcThreadPriority:
    """Gives grpc's threads in this process the nice value ``nice`` at least."""

    def __init__(self, nice: int | None = None) -> None:
        self.nice = wanted_nice() if nice is None else nice
        self.enabled = self.nice > 0 and sys.platform.startswith("linux")
        self._handled_ids: set[int] = set()  # grpc threads at ``nice`` or below already
        self.handled = 0  # grpc threads found so far (lowered, or low enough already)

    def lower_new_threads(self) -> int:
        """Lower the grpc threads not handled yet; how many there were. Blocking (reads
        /proc): ``run`` calls it in a background thread."""
        if not self.enabled:
            return 0
        try:
            current = {int(name) for name in os.listdir(_TASKS)}
        except OSError as exc:  # no /proc here
            log.debug("grpc's threads left at their priority: %s", exc)
            self.enabled = False
            return 0
        self._handled_ids &= current
        found = 0
        # a thread not (yet) named as grpc's is looked at again next time
        for thread_id in current - self._handled_ids:
            try:
                with open(f"{_TASKS}/{thread_id}/comm", "rb") as comm:
                    if comm.read().rstrip(b"\n") not in GRPC_THREAD_NAMES:
                        continue
                if os.getpriority(os.PRIO_PROCESS, thread_id) < self.nice:
                    os.setpriority(os.PRIO_PROCESS, thread_id, self.nice)
            except OSError:  # gone meanwhile
                continue
            self._handled_ids.add(thread_id)
            found += 1
        self.handled += found
        return found

    async def run(self) -> None:
        """Lower grpc's threads every RESCAN_S, until cancelled. A failure ends only
        this: gRPC goes on serving at the priority its threads have."""
        while self.enabled:
            try:
                await run_in_background(self.lower_new_threads)
            except Exception:
                log.warning("grpc's threads are no longer given nice %d", self.nice, exc_info=True)
                return
            await anyio.sleep(RESCAN_S)
