"""The error hierarchy: each error says whose fault it is.

- ``RemoteProtocolError``: the peer sent bytes we cannot accept. It carries the
  ResponseCode to answer with and, when the frame got that far, the request's opaque.
- ``LocalProtocolError``: we were asked to send something the protocol cannot carry.
- ``RemotingError`` and subclasses: the connection, not the content (timeouts,
  refused connections, a peer that went away).
- ``ResponseError``: the peer answered, with a code other than success.
- ``ConfigError`` / ``PluginError``: an operator's configuration or installed plugins.
"""

from __future__ import annotations

from .protocol.codes import ResponseCode


class RocketMQError(Exception):
    """Base of every error this package raises on purpose."""


class ProtocolError(RocketMQError):
    """Bytes or fields that break the remoting protocol.

    ``response_code`` is what to answer a request with; ``opaque`` is the request id
    when the header could be read (else None, and no answer can be matched);
    ``fatal`` means the byte stream can no longer be trusted and the connection must
    be closed.
    """

    def __init__(
        self,
        message: str,
        *,
        response_code: int = ResponseCode.SYSTEM_ERROR,
        opaque: int | None = None,
        fatal: bool = True,
    ) -> None:
        super().__init__(message)
        self.response_code = response_code
        self.opaque = opaque
        self.fatal = fatal


class RemoteProtocolError(ProtocolError):
    """The peer sent something malformed."""


class LocalProtocolError(ProtocolError):
    """We tried to encode something the protocol cannot carry."""


class HeaderError(RemoteProtocolError):
    """A well-framed request whose custom header is missing or has a bad field.

    Never fatal: the request gets an error response and the connection carries on.
    """

    def __init__(self, message: str, *, response_code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(message, response_code=response_code, fatal=False)


class BodyError(RemoteProtocolError):
    """A request body (JSON or binary) that cannot be read. Never fatal."""

    def __init__(self, message: str, *, response_code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(message, response_code=response_code, fatal=False)


class RemotingError(RocketMQError):
    """The conversation failed below the level of content."""


class RemotingConnectError(RemotingError):
    """Could not open a connection to the peer."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response arrived in time."""


class ConnectionClosedError(RemotingError):
    """The connection closed while a request was waiting for its response."""


class ResponseError(RocketMQError):
    """The peer answered with a code other than SUCCESS."""

    def __init__(self, code: int, remark: str | None) -> None:
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = f"code {code}"
        super().__init__(f"{name}: {remark or '(no remark)'}")
        self.code = code
        self.remark = remark


class ConfigError(RocketMQError):
    """A configuration value that cannot be used; the message says which and why."""


class PluginError(RocketMQError):
    """Installed plugins conflict or registered something invalid."""


def found_in(
    exc: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """``exc`` if it is one of ``kinds``, else the first such error inside it when it is an
    exception group (task groups wrap what they raise), else None."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = found_in(inner, kinds)
            if found is not None:
                return found
    return None
