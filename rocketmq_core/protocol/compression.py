"""Message body compression as producers apply it and consumers undo it (MESSAGE.md §7).

sysFlag bit 0 says "compressed"; bits 8-10 name the algorithm (0 legacy = zlib,
1 LZ4, 2 zstd, 3 zlib). zlib means the RFC 1950 stream (with header), as
java.util.zip and the C++ client write it.
"""

from __future__ import annotations

import zlib
from enum import IntEnum

import zstandard

from ..errors import RemoteProtocolError
from .message import COMPRESSED

COMPRESSION_TYPE_MASK = 0x700


class CompressionType(IntEnum):
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def sys_flag(self) -> int:
        """The sysFlag bits of a body compressed with this type."""
        return COMPRESSED | self.value << 8


_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()


def compress(body: bytes, kind: CompressionType, level: int = 5) -> bytes:
    if kind is CompressionType.ZLIB:
        return zlib.compress(body, level)
    if kind is CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=level).compress(body)
    raise ValueError(f"compression {kind.name} is not supported for sending; use ZLIB or ZSTD")


def decompress(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer gave it; ``body`` itself when it is not compressed."""
    if not sys_flag & COMPRESSED:
        return body
    kind = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    try:
        if kind in (0, CompressionType.ZLIB):
            return zlib.decompress(body)
        if kind == CompressionType.ZSTD:
            return _ZSTD_DECOMPRESSOR.decompress(body)
    except (zlib.error, zstandard.ZstdError) as exc:
        raise RemoteProtocolError(f"a compressed message body does not inflate: {exc}") from None
    if kind == CompressionType.LZ4:
        raise RemoteProtocolError("an LZ4-compressed body: install the lz4 package to read it")
    raise RemoteProtocolError(f"unknown compression type {kind} in sysFlag {sys_flag:#x}")
