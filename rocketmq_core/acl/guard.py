"""The server side of ACL: an RPC hook that checks each request before its processor.

A refused request is answered SYSTEM_ERROR with the remark the Java broker gives
(``AclDenied.remark``); the connection's dispatch drops the answer to a oneway request.
The remark and the log name the accessKey and the reason, never the secret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from ..protocol.codes import ResponseCode
from ..protocol.command import RemotingCommand
from ..rate_limited_log import RateLimitedLog
from ..remoting.processor import RequestContext
from .addresses import IPAddress, peer_ip
from .validator import AclDenied, AclValidator, FrameCheck, RequestCheck

log = logging.getLogger("rocketmq.acl")
_refused_log = RateLimitedLog(log)
PEER_IP = "acl.peer_ip"  # RequestContext attribute: the peer's address, parsed once


class AclGuard:
    """An RpcHook: ``before_request`` answers a refused request instead of its processor.

    ``validator`` returns the current validator (the rules may be reloaded at any time:
    ``use`` is told of each new one); ``guarded``: the codes to check, None for all.
    """

    __slots__ = ("_guarded", "_validator", "before_request")

    # it has nothing to do with answers: processors may send finished frames past it
    sees_responses = False

    def __init__(
        self,
        validator: Callable[[], AclValidator],
        *,
        guarded: Collection[int] | None = None,
    ) -> None:
        self._validator = validator
        self._guarded = frozenset(guarded) if guarded is not None else None
        self.before_request: RequestCheck = self.check

    def use(self, validator: AclValidator) -> None:
        """Rules were (re)loaded: the busy requests' check is compiled with them (a
        request it cannot decide goes on to ``check``)."""
        self.before_request = self.check  # never the old rules' hook, whatever happens
        compiled = validator.compiled_hook(self.check) if self._guarded is None else None
        if compiled is not None:
            self.before_request = compiled

    def frame_check(self, ctx: RequestContext) -> FrameCheck | None:
        """What a frame server checks the frames of ``ctx``'s connection with, under the
        rules in force (RpcHook, AclValidator.frame_check); None: none of them is
        answered before this guard sees it."""
        if self._guarded is not None:
            return None
        return self._validator().frame_check(self._peer(ctx))

    def check(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """The whole check: None to serve ``request``, else the refusal to answer with."""
        if self._guarded is not None and request.code not in self._guarded:
            return None
        try:
            self._validator().check(self._peer(ctx), request)
        except AclDenied as denied:
            _refused_log.warning(
                "ACL refused request %d from %s: %s", request.code, ctx.peer_address, denied
            )
            return request.response(ResponseCode.SYSTEM_ERROR, denied.remark)
        return None

    @staticmethod
    def _peer(ctx: RequestContext) -> IPAddress | None:
        """The connection's peer address, parsed once."""
        attributes = ctx.attributes
        if PEER_IP not in attributes:
            attributes[PEER_IP] = peer_ip(ctx.peer_address)
        return attributes[PEER_IP]

    def after_response(
        self, ctx: RequestContext, request: RemotingCommand, response: RemotingCommand
    ) -> None:
        """Nothing to do once answered."""
