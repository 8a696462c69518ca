"""POP consumption on the broker (docs/spec/POP.md): receive with an invisible time,
ack, change the invisible time, and revive what is not acked in time.

``pop_service(broker)`` is the in-process API the remoting processors and the gRPC proxy
call: ``pop``, ``ack``, ``batch_ack``, ``change_invisible``, ``peek``, ``notification``,
``polling_info``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode

if TYPE_CHECKING:
    from ..app import Broker
    from .service import PopService

SERVICE_NAME = "pop"


def pop_service(broker: Broker) -> PopService:
    """The running broker's PopService; SYSTEM_ERROR when POP is not running."""
    service = broker.services.get(SERVICE_NAME)
    if service is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, "POP is not running on this broker; retry once it started"
        )
    return service
