"""The Status of every gRPC answer, and remoting answers translated to it.

The proxy reports failures inside the response's Status with gRPC OK, as RocketMQ's
proxy does; clients read only that Status."""

from __future__ import annotations

from rocketmq_core.errors import RemotingError, ResponseError, RocketMQError
from rocketmq_core.protocol.codes import ResponseCode

from .v2 import definition_pb2 as pb

Code = pb.Code

# remoting ResponseCode -> the gRPC Code a 5.x client acts on
_FROM_REMOTING: dict[int, pb.Code] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


def status(code: pb.Code = Code.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)


OK = status()


class ProxyError(RocketMQError):
    """A request the proxy answers with ``code`` and ``message`` (no gRPC error)."""

    def __init__(self, code: pb.Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> pb.Status:
        return status(self.code, self.message)


def from_remoting_code(code: int) -> pb.Code:
    return _FROM_REMOTING.get(code, Code.INTERNAL_SERVER_ERROR)


def status_of(error: Exception) -> pb.Status:
    """The Status for what a broker or name server answered, or failed to."""
    if isinstance(error, ProxyError):
        return error.status
    if isinstance(error, ResponseError):
        return status(from_remoting_code(error.code), error.remark or f"broker code {error.code}")
    if isinstance(error, TimeoutError):
        return status(Code.PROXY_TIMEOUT, "the broker did not answer in time")
    if isinstance(error, RemotingError | OSError):
        return status(Code.INTERNAL_SERVER_ERROR, f"the broker cannot be reached: {error}")
    return status(Code.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}")
