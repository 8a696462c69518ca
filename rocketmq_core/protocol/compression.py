"""Message body compression as producers apply it and consumers undo it (MESSAGE.md §7).

sysFlag bit 0 says "compressed"; bits 8-10 name the algorithm (0 legacy = zlib,
1 LZ4, 2 zstd, 3 zlib). zlib means the RFC 1950 stream (with header), as
java.util.zip and the C++ client write it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
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
_INFLATE_CHUNK = 256 * 1024


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


# deflate turns one 258-byte match into at least two bits: no zlib body inflates more
ZLIB_MAX_RATIO = 1032


def inflated_size_at_most(body: bytes, sys_flag: int) -> int | None:
    """A bound on the inflated size of a compressed ``body`` known without inflating it:
    deflate's ratio for zlib, the frame's declared size for zstd; None when unknown."""
    kind = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if kind in (0, CompressionType.ZLIB):
        return len(body) * ZLIB_MAX_RATIO
    if kind == CompressionType.ZSTD:
        try:
            declared = zstandard.frame_content_size(body)
        except zstandard.ZstdError:
            return None
        return declared if declared >= 0 else None
    return None


def inflate_within(
    body: bytes, sys_flag: int, keep: int, count_to: int
) -> tuple[int, bytes | None]:
    """How long ``body`` is as the producer gave it, inflating no further than needed.

    Returns (length, the inflated body when length <= ``keep``, else None); the length
    stops at ``count_to + 1`` (a small compressed body must not make us inflate
    gigabytes). An LZ4 body, which this module cannot inflate, gives (-1, None).
    """
    if not sys_flag & COMPRESSED:
        return len(body), body if len(body) <= keep else None
    kind = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if kind in (0, CompressionType.ZLIB):
        chunks = _zlib_chunks(body)
    elif kind == CompressionType.ZSTD:
        chunks = _zstd_chunks(body)
    elif kind == CompressionType.LZ4:
        return -1, None
    else:
        raise RemoteProtocolError(f"unknown compression type {kind} in sysFlag {sys_flag:#x}")
    kept: list[bytes] = []
    length = 0
    try:
        for chunk in chunks:
            length += len(chunk)
            if length > count_to:
                return count_to + 1, None
            if length <= keep:
                kept.append(chunk)
    except (zlib.error, zstandard.ZstdError) as exc:
        raise RemoteProtocolError(f"a compressed message body does not inflate: {exc}") from None
    return length, b"".join(kept) if length <= keep else None


def _zlib_chunks(body: bytes) -> Iterator[bytes]:
    inflater = zlib.decompressobj()
    pending = body
    while True:
        chunk = inflater.decompress(pending, _INFLATE_CHUNK)
        if chunk:
            yield chunk
        pending = inflater.unconsumed_tail
        if inflater.eof:
            return
        if not pending and not chunk:
            raise zlib.error("the stream ends before its end marker")


def _zstd_chunks(body: bytes) -> Iterator[bytes]:
    with _ZSTD_DECOMPRESSOR.stream_reader(body) as reader:
        while chunk := reader.read(_INFLATE_CHUNK):
            yield chunk
