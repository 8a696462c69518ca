"""Ports for the servers a test or a benchmark starts.

``bind(("127.0.0.1", 0))`` gives a free port from the kernel's ephemeral range, the
range it also hands to every outgoing connection: between that probe and the server's
own bind, a connection anywhere on the machine (the server starting, connecting to its
name server) may take the port, and the server cannot start. The ports here are picked
outside that range, at random (parallel test workers seldom pick the same), and are
free when picked.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable
from pathlib import Path

from ..errors import RocketMQError

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# where ports are picked, [low, high): below Linux's default ephemeral range (32768-60999)
PICKED_PORTS = (20000, 32000)
_ATTEMPTS = 100
# its own generator: a test that seeds the random module (for repeatable data) would
# otherwise make every worker walk the same ports
_pick = random.SystemRandom()


class NoFreePort(RocketMQError, LookupError):
    """No port could be picked (the ephemeral range covers the picked ones, or all taken)."""


def ephemeral_ports() -> range:
    """The ports the kernel hands to outgoing connections and to bind(port 0)."""
    try:
        low, high = (int(part) for part in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def is_free(port: int) -> bool:
    """Nothing is bound to ``port`` on any address."""
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_offset(ports: Iterable[int]) -> int:
    """An offset that moves every one of ``ports`` (a layout's, as its files say) to a
    free port outside the ephemeral range; raises NoFreePort."""
    wanted = sorted(set(ports))
    ephemeral = ephemeral_ports()
    low, high = PICKED_PORTS
    candidates = [
        offset
        for offset in range(low - wanted[0], high - wanted[-1])
        if not any(port + offset in ephemeral for port in wanted)
    ]
    if not candidates:
        raise NoFreePort(
            f"no ports in {low}-{high} outside the ephemeral range"
            f" {ephemeral.start}-{ephemeral.stop - 1} ({EPHEMERAL_RANGE_FILE})"
        )
    for _attempt in range(_ATTEMPTS):
        offset = _pick.choice(candidates)
        if all(is_free(port + offset) for port in wanted):
            return offset
    raise NoFreePort(f"no free ports for {wanted} in {_ATTEMPTS} tries")


def free_port(*, neighbours: Iterable[int] = ()) -> int:
    """A free port outside the ephemeral range, with the ports ``neighbours`` away from
    it free too (a broker's listenPort: its VIP port -2 and HA port +1)."""
    return free_offset([0, *neighbours])
