"""JSON the way RocketMQ's Java side writes it (fastjson), and a reader that takes it.

Java maps with ``Long`` keys come out of fastjson with bare keys
(``{0:"10.0.0.1:10911"}``) and maps with object keys with the object itself as the
key. Clients before 4.9.4 get that form; newer ones ask for standard JSON, where
fastjson's BrowserCompatible/MapSortField features quote keys, escape non-ASCII,
write longs beyond 2^53 as strings and sort map entries (ROUTE.md §1.1).

``dumps`` writes either form from plain Python values: a dict is a bean or a map
(give beans their properties in alphabetical order, leave out nulls). ``loads``
reads standard JSON fast and falls back to a lenient parser for the Java forms;
object keys come back as tuples of ``(name, value)`` pairs so they stay hashable.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any, NoReturn

import orjson

from ..errors import BodyError
from .codes import ResponseCode

_BROWSER_SAFE_LONG = (1 << 53) - 1
# No RocketMQ body nests deeper than ~6 levels; a peer's 10,000 brackets must not
# reach a recursive parser (Python's limit is 1,000 frames, orjson's 1,024 levels).
MAX_DEPTH = 64


class JsonError(BodyError, ValueError):
    """JSON a peer sent that cannot be read: a BodyError answered with its code, and a
    ValueError for callers that add which body it was."""

    def __init__(self, message: str, *, response_code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(message, response_code=response_code)


def dumps(value: Any, *, standard: bool = True) -> bytes:
    """``value`` as fastjson writes it: standard JSON, or Java's default (bare keys)."""
    out: list[str] = []
    _write(value, out, standard)
    return "".join(out).encode()


def _write(value: Any, out: list[str], standard: bool) -> None:
    if isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=standard))
    elif value is None or isinstance(value, bool):
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        if standard and abs(value) > _BROWSER_SAFE_LONG:
            out.append(f'"{value}"')
        else:
            out.append(str(value))
    elif isinstance(value, float):
        out.append(repr(value))
    elif isinstance(value, dict):
        items = sorted(value.items(), key=_sort_key) if standard else value.items()
        out.append("{")
        for index, (key, item) in enumerate(items):
            if index:
                out.append(",")
            if isinstance(key, str):
                out.append(json.dumps(key, ensure_ascii=standard))
            elif isinstance(key, int) and not isinstance(key, bool):
                out.append(f'"{key}"' if standard else str(key))
            elif isinstance(key, tuple):  # an object key, as (name, value) pairs
                _write(dict(key), out, standard)
            else:
                raise TypeError(f"cannot write a map key of type {type(key).__name__}")
            out.append(":")
            _write(item, out, standard)
        out.append("}")
    elif isinstance(value, list | tuple | set | frozenset):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _sort_key(item: tuple[Any, Any]) -> Any:
    return item[0]


def loads(data: bytes | str) -> Any:
    """Parse JSON from a RocketMQ peer: standard JSON, or fastjson's bare and object keys.

    Raises JsonError (a ValueError) with the position of the first thing it cannot read;
    text nested deeper than MAX_DEPTH or not UTF-8 is refused with INVALID_PARAMETER.
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    check_depth(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise JsonError(
            f"invalid JSON: not UTF-8 at byte {exc.start} ({raw[exc.start : exc.start + 4]!r})",
            response_code=ResponseCode.INVALID_PARAMETER,
        ) from None
    parser = _LenientParser(text)
    value = parser.value()
    parser.skip_space()
    if parser.pos != len(parser.text):
        parser.fail("unexpected text after the JSON value")
    return value


# brackets opening a level become 1, those closing one 255 (-1 as a signed byte); the rest go
_LEVEL_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_STRING_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# bytes scanned at a time: a body nested too deep is refused after its first chunk or so
_DEPTH_CHUNK = 4096


def check_depth(raw: bytes, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit``, without parsing it.

    Brackets are counted (in C) a chunk at a time, which settles almost every chunk; one
    that could go too deep is walked, and the scan stops at the first that does. Brackets
    inside strings count too, so a body found too deep that has strings is checked again
    with its strings left out.
    """
    if len(raw) <= _DEPTH_CHUNK and raw.count(b"[") + raw.count(b"{") <= limit:
        return  # the common case: a small body with few brackets
    if not _deeper_than(raw, limit):
        return
    if b'"' in raw and not _deeper_than(_STRING_BYTES.sub(b"", raw), limit):
        return
    raise JsonError(
        f"JSON nested more than {limit} levels deep: at most {limit} are accepted",
        response_code=ResponseCode.INVALID_PARAMETER,
    )


def _deeper_than(raw: bytes, limit: int) -> bool:
    """Whether the brackets of ``raw`` ever open more than ``limit`` levels."""
    depth = 0
    for start in range(0, len(raw), _DEPTH_CHUNK):
        chunk = raw[start : start + _DEPTH_CHUNK]
        opening = chunk.count(b"[") + chunk.count(b"{")
        if depth + opening > limit:  # it may go too deep within this chunk: walk it
            steps = array("b", chunk.translate(_LEVEL_STEPS, _NOT_BRACKETS))
            if max(accumulate(steps, initial=depth)) > limit:
                return True
        depth += opening - chunk.count(b"]") - chunk.count(b"}")
    return False


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_SPACE = re.compile(r"\s*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_BARE_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


class _LenientParser:
    """Recursive descent over text; strings and numbers are read by the json module."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> NoReturn:
        raise JsonError(f"invalid JSON at character {self.pos}: {message}")

    def skip_space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def value(self) -> Any:
        self.skip_space()
        if self.pos >= len(self.text):
            self.fail("unexpected end of input")
        char = self.text[self.pos]
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            return self.string()
        number = _NUMBER.match(self.text, self.pos)
        if number:
            self.pos = number.end()
            return self.scalar(number.group())
        for word, result in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        self.fail(f"unexpected character {char!r}")

    def string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            self.fail("unterminated string")
        self.pos = match.end()
        text: str = self.scalar(match.group())
        return text

    def scalar(self, text: str) -> Any:
        """A string or number, read by the json module (which refuses 5,000-digit ints)."""
        try:
            return json.loads(text)
        except ValueError as exc:
            self.fail(str(exc))

    def object(self) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        self.skip_space()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            key = self.key()
            self.skip_space()
            if not self.text.startswith(":", self.pos):
                self.fail("expected ':' after an object key")
            self.pos += 1
            result[key] = self.value()
            self.skip_space()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("}", self.pos):
                self.pos += 1
                return result
            else:
                self.fail("expected ',' or '}' in an object")

    def key(self) -> Any:
        self.skip_space()
        char = self.text[self.pos : self.pos + 1]
        if char == "{":  # fastjson writes object-valued map keys as the object itself
            return tuple(self.object().items())
        if char == '"':
            return self.string()
        number = _NUMBER.match(self.text, self.pos)
        if number:  # a bare Long key
            self.pos = number.end()
            return self.scalar(number.group())
        word = _BARE_WORD.match(self.text, self.pos)
        if word:
            self.pos = word.end()
            return word.group()
        self.fail("expected an object key")

    def array(self) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.skip_space()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            self.skip_space()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("]", self.pos):
                self.pos += 1
                return result
            else:
                self.fail("expected ',' or ']' in an array")
