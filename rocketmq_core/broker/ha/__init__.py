"""Master/slave replication over the HA port (RocketMQ 4.x's format, docs/spec/HA.md).

``progress`` is the sans-IO core (the slaves' acked offset, the sends waiting for it);
``master`` serves slaves, ``slave`` follows a master, ``service`` is the broker service
that runs the side the broker's role needs.
"""

from __future__ import annotations

import anyio

# what ends an HA connection on either side (the peer went away, or the socket failed)
CONNECTION_LOST = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    OSError,
)
