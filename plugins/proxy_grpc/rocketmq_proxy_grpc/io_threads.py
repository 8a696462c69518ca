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
do. Where a core has time to spare, nothing changes. ``ROCKETMQ_GRPC_THREAD_NICE=0``
leaves them at the process's priority.

Threads are told apart by the names grpc's core gives them. Its pool grows under load,
so a running proxy looks again now and then (``GrpcThreadPriority.run``).
"""

from __future__ import annotations

import logging
import os
import sys

import anyio

log = logging.getLogger("rocketmq.proxy")

NICE = 15  # as low as helps (15 and 19 measure the same), and a little more share than 19
# the names grpc's core gives its threads (a Linux thread name keeps 15 characters)
GRPC_THREAD_NAMES = frozenset({"event_engine", "lifeguard", "grpc_global_tim"})
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
    return min(max(value, 0), 19)  # a thread may lower its priority, not raise it


class GrpcThreadPriority:
    """Gives grpc's threads in this process the nice value ``nice`` (Linux only: there a
    nice value is a thread's own; elsewhere it would be the whole process's)."""

    def __init__(self, nice: int | None = None) -> None:
        self.nice = wanted_nice() if nice is None else nice
        self.enabled = self.nice > 0 and sys.platform.startswith("linux")
        self._looked_at: set[int] = set()  # thread ids whose name was read already
        self.lowered = 0  # grpc threads given ``nice`` so far

    def lower_new_threads(self) -> int:
        """Lower the grpc threads started since the last look; how many there were."""
        if not self.enabled:
            return 0
        try:
            current = {int(name) for name in os.listdir(_TASKS)}
        except OSError as exc:  # no /proc here
            log.debug("grpc's threads left at their priority: %s", exc)
            self.enabled = False
            return 0
        self._looked_at &= current  # an id is used again only after its thread is gone
        lowered = 0
        for thread_id in current - self._looked_at:
            self._looked_at.add(thread_id)
            try:
                with open(f"{_TASKS}/{thread_id}/comm") as comm:
                    name = comm.read().strip()
                if name in GRPC_THREAD_NAMES:
                    os.setpriority(os.PRIO_PROCESS, thread_id, self.nice)
                    lowered += 1
            except OSError:  # gone meanwhile
                continue
        self.lowered += lowered
        return lowered

    async def run(self) -> None:
        """Lower grpc's threads now and then, until cancelled."""
        while self.enabled:
            self.lower_new_threads()
            await anyio.sleep(RESCAN_S)
