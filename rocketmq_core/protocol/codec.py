"""Frames <-> RemotingCommands (REMOTING.md §2, §5, §6).

``FrameDecoder.feed`` takes whatever chunk a socket produced (half a frame, many
frames) and returns the complete commands in it. ``encode_command`` does the reverse.
Malformed input raises RemoteProtocolError and nothing else.

A compiled helper (_frames.c) decodes the usual frames (JSON headers of the usual
shape) where it is built; it leaves every other frame, and every error, to the Python
code here, which is its reference and works alone.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import NoReturn

import orjson

from ..errors import LocalProtocolError, RemoteProtocolError
from .codes import LanguageCode, ResponseCode, SerializeType
from .command import RemotingCommand

# Java's frameMaxLength: 16 MiB counting the 4-byte length prefix.
MAX_FRAME_LENGTH = 16 * 1024 * 1024
_MAX_HEADER_LENGTH = 0xFFFFFF  # 24 bits

_INT32 = struct.Struct(">I")
_PREFIX = struct.Struct(">II")  # length, then serialize type << 24 | header length
# code, language, version, opaque, flag, remark length
_BINARY_FIXED = struct.Struct(">hBhiii")
_BINARY_KEY_LEN = struct.Struct(">h")
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ

_DECIMAL = re.compile(r"-?[0-9]{1,19}")
_loads = orjson.loads
_new_command = object.__new__  # decoding fills every slot itself: no __init__ call
_LANGUAGE_BY_NAME = {language.name: int(language) for language in LanguageCode}
_LANGUAGE_NAMES = {int(language): language.name for language in LanguageCode}
_OTHER = int(LanguageCode.OTHER)

compiled: ModuleType | None
try:  # built by setup.py where a C compiler is; FrameDecoder.feed does the same work
    from . import _frames as compiled
except ImportError:
    compiled = None
# the compiled helper when built; ROCKETMQ_FRAMES_COMPILED=0 runs the Python code alone
COMPILED = compiled if os.environ.get("ROCKETMQ_FRAMES_COMPILED", "1") != "0" else None
# what the helper fills: RemotingCommand's slots, in the order _frames.c names them
_SLOTS = tuple(
    RemotingCommand.__dict__[name]
    for name in (
        "code",
        "opaque",
        "flag",
        "version",
        "language",
        "remark",
        "ext_fields",
        "body",
        "serialize_type",
    )
)


class FrameDecoder:
    """Turns a byte stream into RemotingCommands, one chunk at a time."""

    __slots__ = ("_buffer", "_failed", "max_frame_length", "serve_first", "served")

    def __init__(self, max_frame_length: int = MAX_FRAME_LENGTH) -> None:
        self._buffer = bytearray()
        self._failed: RemoteProtocolError | None = None
        self.max_frame_length = max_frame_length
        # (source, position) -> position: answers the whole frames it takes from
        # ``position`` on (a processor table's FrameServer) before any is decoded, while
        # no frame of this feed was decoded before them (their order is kept)
        self.serve_first: Callable[[bytes | bytearray, int], int] | None = None
        self.served = False  # whether serve_first took frames in the last feed

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of their frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add ``data``; return every command now complete, in order.

        After a fatal error the stream cannot be resynchronised, so every later call
        raises the same error. When frames came before the bad one, they are returned
        first and ``failure`` is set: the error is raised by the next call.
        """
        if self._failed is not None:
            raise self._failed
        if type(data) is not bytes:
            data = bytes(data)
        buffer = self._buffer
        commands: list[RemotingCommand] = []
        self.served = False
        try:
            start = self._complete_held_frame(commands, buffer, data) if buffer else 0
            if not buffer and start < len(data):
                self._decode_into(commands, data, start)
        except RemoteProtocolError:
            buffer.clear()  # nothing more is decoded: no bytes are held for later
            if commands:  # hand over what came before; ``failure`` says why it stopped
                return commands
            raise
        return commands

    @property
    def failure(self) -> RemoteProtocolError | None:
        """The error the stream stopped at (every later ``feed`` raises it), or None."""
        return self._failed

    def _complete_held_frame(
        self, commands: list[RemotingCommand], buffer: bytearray, data: bytes
    ) -> int:
        """Move into ``buffer`` what its held frame lacks of ``data``, and no more (a
        whole chunk appended would be copied once more, and grow the buffer to its size:
        freshly zeroed pages each time); decode the frame once whole. Returns how many
        bytes of ``data`` it took: the rest is decoded from ``data`` itself."""
        taken = 0
        if len(buffer) < 4:  # the length itself came in pieces
            taken = min(4 - len(buffer), len(data))
            buffer += data[:taken]
            if len(buffer) < 4:
                return taken
        length: int = _INT32.unpack_from(buffer, 0)[0]
        if length > self.max_frame_length - 4 or length < 4:
            # with what follows: the error names the request once its header is there
            self._fail_on_length(bytes(buffer) + data[taken:], 0, length)
        missing = 4 + length - len(buffer)
        more = min(missing, len(data) - taken)
        with memoryview(data) as view:
            buffer += view[taken : taken + more]
        if more == missing:
            self._decode_into(commands, buffer, 0)  # exactly this frame: it empties buffer
        return taken + more

    def _decode_into(
        self, commands: list[RemotingCommand], source: bytes | bytearray, start: int
    ) -> None:
        """Decode the whole frames of ``source`` from ``start`` on; ``source`` is the
        held buffer (one frame) or a chunk, whose incomplete tail is then held."""
        buffer = self._buffer
        end = len(source)
        position = start
        max_length = self.max_frame_length - 4
        unpack_prefix = _PREFIX.unpack_from
        helper = COMPILED
        serve_first = self.serve_first
        while end - position >= 8:
            if serve_first is not None and not commands:
                served_to = serve_first(source, position)
                self.served = self.served or served_to != position
                position = served_to
                if end - position < 8:
                    break
            if helper is not None:  # the usual frames; it stops before any other one
                decoded, position = helper.decode_frames(
                    source, position, max_length, _loads, RemotingCommand, _SLOTS,
                    _LANGUAGE_BY_NAME, _OTHER, _JSON,
                )  # fmt: skip
                commands += decoded
                if end - position < 8:
                    break
            length, type_and_length = unpack_prefix(source, position)
            if length > max_length or length < 4:
                self._fail_on_length(source, position, length)
            frame_end = position + 4 + length
            if frame_end > end:
                break
            header_start = position + 8
            body_start = header_start + (type_and_length & 0xFFFFFF)
            if body_start > frame_end:
                self._fail(
                    f"bad header length {type_and_length & 0xFFFFFF}: the frame has only"
                    f" {length - 4} bytes after the length fields"
                )
            try:
                command = _decode_header(type_and_length >> 24, source[header_start:body_start])
            except RemoteProtocolError as exc:
                self._failed = exc
                raise
            if body_start < frame_end:
                command.body = (
                    source[body_start:frame_end]
                    if type(source) is bytes
                    else _copy_out(source, body_start, frame_end)
                )
            commands.append(command)
            position = frame_end
        if end - position >= 4:  # a length alone can already be refused
            (length,) = _INT32.unpack_from(source, position)
            if length > max_length or length < 4:
                self._fail_on_length(source, position, length)
        if source is buffer:
            del buffer[:position]
        elif position < end:
            buffer += source[position:]

    def _fail(self, message: str, opaque: int | None = None) -> NoReturn:
        self._failed = RemoteProtocolError(message, opaque=opaque)
        raise self._failed

    def _fail_on_length(self, view: bytes | bytearray, position: int, length: int) -> None:
        if length < 4:
            self._fail(f"bad frame length {length}: a frame has at least 4 bytes")
        # Name the request in the error when its header has already arrived.
        opaque = None
        if len(view) - position >= 8:
            (type_and_length,) = _INT32.unpack_from(view, position + 4)
            header_end = position + 8 + (type_and_length & 0xFFFFFF)
            if header_end <= len(view):
                try:
                    header = _decode_header(type_and_length >> 24, view[position + 8 : header_end])
                    opaque = header.opaque
                except RemoteProtocolError:
                    pass
        self._failed = RemoteProtocolError(
            f"frame of {length + 4} bytes exceeds the limit of {self.max_frame_length} bytes",
            response_code=ResponseCode.MESSAGE_ILLEGAL,
            opaque=opaque,
        )
        raise self._failed


def _copy_out(buffer: bytes | bytearray, start: int, end: int) -> bytes:
    with memoryview(buffer) as view:
        return view[start:end].tobytes()  # one copy, where bytes(buffer[a:b]) makes two


def encode_command(command: RemotingCommand, max_frame_length: int = MAX_FRAME_LENGTH) -> bytes:
    """The whole frame of ``command``, length prefix included."""
    parts: list[bytes] = []
    encode_into(command, parts, max_frame_length)
    return b"".join(parts)


def encode_into(
    command: RemotingCommand, out: list[bytes], max_frame_length: int = MAX_FRAME_LENGTH
) -> int:
    """Append the frame of ``command`` to ``out`` as parts; return its size.

    Parts let a writer join many frames with one copy of each body.
    """
    try:
        if command.serialize_type == _ROCKETMQ:
            header = _encode_binary_header(command)
        else:
            header = _encode_json_header(command)
        body = command.body
        if type(body) is not bytes:
            body = bytes(body)  # bytearray and memoryview are fine; str is a bug
    except LocalProtocolError:
        raise
    except Exception as exc:
        raise LocalProtocolError(
            f"cannot encode {command!r}: {type(exc).__name__}: {exc}", opaque=command.opaque
        ) from None
    header_length = len(header)
    length = 4 + header_length + len(body)
    if length > max_frame_length - 4:
        raise LocalProtocolError(
            f"frame of {length + 4} bytes exceeds the limit of {max_frame_length} bytes",
            response_code=ResponseCode.MESSAGE_ILLEGAL,
            opaque=command.opaque,
        )
    if header_length > _MAX_HEADER_LENGTH:
        raise LocalProtocolError(f"header of {header_length} bytes does not fit 24 bits")
    out.append(_PREFIX.pack(length, command.serialize_type << 24 | header_length) + header)
    if body:
        out.append(body)
    return length + 4


# --- JSON header -----------------------------------------------------------------


def decode_json_header(header: bytes | bytearray) -> RemotingCommand:
    """The request of a JSON header alone, without its body (a frame a FrameServer took,
    answered after all as a processor's error is answered)."""
    return _decode_header(_JSON, header)


def _decode_header(serialize_type: int, header: bytes | bytearray) -> RemotingCommand:
    try:
        if serialize_type == _JSON:
            return _decode_json_header(header)
        if serialize_type == _ROCKETMQ:
            return _decode_binary_header(header)
    except RemoteProtocolError:
        raise
    except Exception as exc:  # whatever a hostile header provokes stays a protocol error
        raise RemoteProtocolError(f"undecodable header: {type(exc).__name__}: {exc}") from None
    raise RemoteProtocolError(f"unknown serialize type {serialize_type}: only 0 (JSON) and 1")


def _decode_json_header(header: bytes | bytearray) -> RemotingCommand:
    try:
        fields = _loads(header)
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"header is not valid JSON: {exc}") from None
    if type(fields) is not dict:
        raise RemoteProtocolError("header JSON is not an object")
    get = fields.get
    code = get("code")
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    if type(code) is not int or type(opaque) is not int:
        opaque = opaque if type(opaque) is int else _json_int(fields, "opaque", None)
        code = _json_int(fields, "code", opaque)
    if type(flag) is not int or type(version) is not int:
        flag = _json_int(fields, "flag", opaque, 0)
        version = _json_int(fields, "version", opaque, 0)
    if not -0x80000000 <= opaque <= 0x7FFFFFFF:
        raise RemoteProtocolError(f"opaque {opaque} is not an int32")
    language = get("language")
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise RemoteProtocolError(
            f"header field 'remark' is not a string: {remark!r}", opaque=opaque
        )
    ext_fields = get("extFields")
    if ext_fields is None:
        ext_fields = {}
    elif type(ext_fields) is not dict:
        raise RemoteProtocolError(
            f"header field 'extFields' is not an object: {ext_fields!r}", opaque=opaque
        )
    else:
        for value in ext_fields.values():
            if type(value) is not str:
                ext_fields = _stringify_values(ext_fields)
                break
    command = _new_command(RemotingCommand)
    command.code = code
    command.opaque = opaque
    command.flag = flag
    command.version = version
    command.language = (
        _LANGUAGE_BY_NAME.get(language, _OTHER)
        if type(language) is str
        else _json_language(language)
    )
    command.remark = remark
    command.ext_fields = ext_fields
    command.body = b""
    command.serialize_type = _JSON
    return command


def _json_int(
    fields: Mapping[str, object], name: str, opaque: int | None, default: int | None = None
) -> int:
    value = fields.get(name, default)
    if type(value) is int:
        return value
    # fastjson reads numeric strings as numbers; so do we.
    if type(value) is str and _DECIMAL.fullmatch(value):
        return int(value)
    if value is None:
        raise RemoteProtocolError(f"header has no {name!r}", opaque=opaque)
    raise RemoteProtocolError(f"header field {name!r} is not an integer: {value!r}", opaque=opaque)


def _json_language(value: object) -> int:
    if type(value) is str:
        return _LANGUAGE_BY_NAME.get(value, _OTHER)
    if type(value) is int and value in _LANGUAGE_NAMES:
        return value
    return _OTHER


def _stringify_values(fields: Mapping[str, object]) -> dict[str, str]:
    """Values as Java would read them: numbers as decimal text, null as absent."""
    result = {}
    for key, value in fields.items():
        if value is None:
            continue
        if type(value) is str:
            result[key] = value
        elif value is True or value is False:
            result[key] = "true" if value else "false"
        elif type(value) is int:
            result[key] = str(value)
        elif type(value) is float:
            result[key] = repr(value)
        else:
            result[key] = orjson.dumps(value).decode()
    return result


def _encode_json_header(command: RemotingCommand) -> bytes:
    fields: dict[str, object] = {"code": command.code}
    ext_fields = command.ext_fields
    if ext_fields:
        for value in ext_fields.values():
            if type(value) is not str:
                # The C++ client ignores every non-string value: always send text.
                ext_fields = _stringify_values(ext_fields)
                break
        fields["extFields"] = ext_fields
    fields["flag"] = command.flag
    fields["language"] = _LANGUAGE_NAMES.get(command.language, "OTHER")
    fields["opaque"] = command.opaque
    if command.remark is not None:
        fields["remark"] = command.remark
    fields["version"] = command.version
    try:
        return orjson.dumps(fields)
    except TypeError as exc:
        raise LocalProtocolError(f"cannot encode header: {exc}", opaque=command.opaque) from None


# --- ROCKETMQ binary header --------------------------------------------------------


def _decode_binary_header(header: bytes | bytearray) -> RemotingCommand:
    size = len(header)
    if size < _BINARY_FIXED.size + 4:
        raise RemoteProtocolError(f"binary header of {size} bytes is shorter than 21 bytes")
    code, language, version, opaque, flag, remark_length = _BINARY_FIXED.unpack_from(header)
    position = _BINARY_FIXED.size
    remark = None
    if remark_length:
        if remark_length < 0 or position + remark_length + 4 > size:
            raise RemoteProtocolError(
                f"binary header remark length {remark_length} overruns the header", opaque=opaque
            )
        remark = _utf8(header[position : position + remark_length], opaque)
        position += remark_length
    (ext_length,) = _INT32.unpack_from(header, position)
    position += 4
    if position + ext_length > size:
        raise RemoteProtocolError(
            f"binary header extFields length {ext_length} overruns the header", opaque=opaque
        )
    ext_fields = _decode_binary_map(header[position : position + ext_length], opaque)
    return RemotingCommand(
        code,
        opaque=opaque,
        flag=flag,
        version=version,
        language=language if language in _LANGUAGE_NAMES else _OTHER,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=_ROCKETMQ,
    )


def _decode_binary_map(block: bytes | bytearray, opaque: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    position = 0
    size = len(block)
    while position < size:
        if position + 2 > size:
            raise RemoteProtocolError("binary header map entry is cut short", opaque=opaque)
        (key_length,) = _BINARY_KEY_LEN.unpack_from(block, position)
        position += 2
        if key_length < 0 or position + key_length + 4 > size:
            raise RemoteProtocolError("binary header map key overruns the map", opaque=opaque)
        key = _utf8(block[position : position + key_length], opaque)
        position += key_length
        (value_length,) = _INT32.unpack_from(block, position)
        position += 4
        if position + value_length > size:
            raise RemoteProtocolError("binary header map value overruns the map", opaque=opaque)
        value = _utf8(block[position : position + value_length], opaque)
        position += value_length
        # Java reads a zero-length string as null, and a null field as absent.
        if key and value:
            fields[key] = value
    return fields


def _utf8(data: bytes | bytearray, opaque: int) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"binary header text is not UTF-8: {exc}", opaque=opaque
        ) from None


def _int16(value: int) -> int:
    """Java's (short) cast: keep the low 16 bits, signed."""
    return ((value + 0x8000) & 0xFFFF) - 0x8000


def _encode_binary_header(command: RemotingCommand) -> bytes:
    if not -0x8000 <= command.code <= 0x7FFF:
        raise LocalProtocolError(
            f"code {command.code} does not fit the ROCKETMQ header's 16 bits; use JSON",
            opaque=command.opaque,
        )
    remark = command.remark.encode() if command.remark else b""
    entries = []
    for key, value in command.ext_fields.items():
        if value is None:
            continue
        key_bytes = key.encode()
        value_bytes = (
            value if type(value) is str else _stringify_values({key: value})[key]
        ).encode()
        entries.append(_BINARY_KEY_LEN.pack(len(key_bytes)) + key_bytes)
        entries.append(_INT32.pack(len(value_bytes)) + value_bytes)
    ext_block = b"".join(entries)
    return b"".join(
        (
            _BINARY_FIXED.pack(
                command.code,
                command.language & 0xFF,
                _int16(command.version),
                command.opaque,
                command.flag,
                len(remark),
            ),
            remark,
            _INT32.pack(len(ext_block)),
            ext_block,
        )
    )
