"""Plain-text tables and JSON documents for command-line output (``rocketmq topic ...``)."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson

from ..client.message import ReceivedMessage


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Columns aligned with two spaces between them; numbers right-aligned."""
    body = [list(row) for row in rows]
    numeric = [
        bool(body) and all(isinstance(row[i], int | float) for row in body)
        for i in range(len(headers))
    ]
    cells = [list(headers)] + [[_cell(value) for value in row] for row in body]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(row, widths, numeric, strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def timestamp(millis: int) -> str:
    """A store time in local time to the millisecond; ``-`` for none (0)."""
    if millis <= 0:
        return "-"
    seconds, rest = divmod(millis, 1000)
    return f"{datetime.fromtimestamp(seconds):%Y-%m-%d %H:%M:%S}.{rest:03d}"


def body_text(body: bytes) -> tuple[str, bool]:
    """(text, is_base64): UTF-8 bodies as they are, anything else in base64."""
    try:
        return body.decode(), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode(), True


# line breaks and tabs inside a body, written as escapes: one message stays one line
_ONE_LINE = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def body_line(body: bytes) -> str:
    """The body on one line: text with its line breaks escaped, or base64 when binary."""
    return body_text(body)[0].translate(_ONE_LINE)


def message_json(message: ReceivedMessage) -> dict[str, Any]:
    """A received message as a JSON object; the body as text, or base64 when binary."""
    document = dataclasses.asdict(message)
    text, encoded = body_text(message.body)
    document.pop("body")
    document["body_base64" if encoded else "body"] = text
    document["tags"] = message.tags
    document["keys"] = message.keys
    return document


def to_json(document: Any) -> str:
    """Indented JSON (dataclasses, enums and int map keys included), with a newline."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
    return orjson.dumps(document, default=_default, option=option).decode()


def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return body_text(bytes(value))[0]
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
