"""The error hierarchy: one base to catch, and each error says whose fault it is.

Every exception the package and its plugins raise on purpose is a ``RocketMQError``;
where callers catch a builtin too, it stays a base (``StoreClosedError`` is also a
``RuntimeError``, ``DiskFullError`` an ``OSError``). ::

    RocketMQError
    +-- ProtocolError               bytes or fields the remoting protocol cannot carry
    |   +-- RemoteProtocolError     the peer sent them; carries the ResponseCode to answer
    |   |   +-- HeaderError         a custom header field missing or bad (never fatal)
    |   |   +-- BodyError           a body that cannot be read (never fatal)
    |   |       +-- JsonError       (protocol.fastjson; also a ValueError)
    |   +-- LocalProtocolError      we were asked to send something it cannot carry
    +-- RemotingError               the connection, not the content
    |   +-- RemotingConnectError
    |   +-- RemotingTimeoutError    (also a TimeoutError)
    |   +-- ConnectionClosedError
    +-- ResponseError               CLIENT side: the peer answered with a refusal code
    +-- RequestRefused              SERVER side: a processor refuses this request
    +-- MQClientError               (client.producer) a client call cannot be made as asked
    +-- ConsumerError               (client.consumer_requests) a consumer used in a way that fails
    +-- AdminError                  (client.admin_types) an admin call failed
    |   +-- TopicExistsError
    +-- RecordError                 (protocol.message) bytes that are not a valid record
    +-- StoreError                  a store cannot do what was asked
    |   +-- StoreClosedError        (store.api; also a RuntimeError)
    |   +-- FileCreationError       (store_mmap; also an OSError)
    |   |   +-- DiskFullError
    |   +-- WriteStalled            (store_rocksdb) RocksDB holds writes back
    |   +-- WriteFailed             (store_rocksdb) RocksDB refused a write
    +-- ConfigError                 an operator's configuration
    |   +-- OptionError             (spark; also a ValueError) a bad data source option
    +-- PluginError                 installed plugins conflict or registered something bad
    +-- DataLossError, SinkSchemaError   (spark)
    +-- CommandError, UsageError    (the CLI) a command that cannot run as asked
    +-- NoFreePort                  (testing.ports; also a LookupError) no port to start a server on

``ResponseError`` and ``RequestRefused`` both carry a ResponseCode and a remark, and are
two classes on purpose: the first is what a caller of a peer gets back (catch it, look
at ``code``); the second is what a processor, put hook or name-server handler raises to
have the server answer the request with ``code`` and ``remark``. A ``ResponseError``
that escapes a processor (a call to another peer failed) is a failure of that processor,
answered SYSTEM_ERROR, never relayed as if this server had refused.
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


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"


class ResponseError(RocketMQError):
    """Client side: the peer answered a request of ours with a code other than SUCCESS.

    Raised by the SDK (``ClientInstance.request`` and the calls above it); ``code`` is
    the peer's ResponseCode and ``remark`` its reason. A server never raises it to
    refuse a request: that is ``RequestRefused``.
    """

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"{_code_name(code)}: {remark or '(no remark)'}")
        self.code = code
        self.remark = remark


class RequestRefused(RocketMQError):
    """Server side: refuse the request being processed with ``code`` and ``remark``.

    Raised by processors, put hooks and the helpers they call (broker, name server,
    plugins); the connection answers the request with exactly this code and remark,
    and the peer's SDK sees it as a ``ResponseError``. Never raised by client code.
    """

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"{_code_name(code)}: {remark}")
        self.code = code
        self.remark = remark


class StoreError(RocketMQError):
    """A store cannot do what was asked (closed, out of disk, its engine refused)."""


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
