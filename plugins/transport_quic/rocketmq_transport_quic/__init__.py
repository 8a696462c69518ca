"""QUIC transport for rocketmq-py: the same remoting frames over QUIC (aioquic)."""

from .transport import ALPN, QuicSettings, QuicTransport

__all__ = ["ALPN", "QuicSettings", "QuicTransport"]
