"""TCP (and TLS) transport for rocketmq-py."""

from .transport import TcpTransport

__all__ = ["TcpTransport"]
