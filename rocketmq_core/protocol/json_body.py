"""Reading a JSON body: the object it holds, and decoders that name the body when a
value has the wrong type. Shared by the body modules (``bodies/``, ``heartbeat``); sans-IO.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import BodyError
from . import fastjson
from .codes import ResponseCode

T = TypeVar("T")


def load_object(data: bytes, what: str) -> dict[Any, Any]:
    """The JSON object ``data`` holds; BodyError naming ``what`` for anything else."""
    try:
        value = fastjson.loads(data)
    except ValueError as exc:  # too deep or not UTF-8 keep their INVALID_PARAMETER
        code = getattr(exc, "response_code", ResponseCode.SYSTEM_ERROR)
        raise BodyError(f"the {what} body is not JSON: {exc}", response_code=code) from None
    if not isinstance(value, dict):
        raise BodyError(f"the {what} body is not a JSON object")
    return value


def body_decoder(what: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decoder whose JSON held a value of the wrong type (a number where a list
    belongs) raises BodyError naming ``what``, not the TypeError it ran into."""

    def decorate(decode: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(decode)
        def checked(*args: Any, **kwargs: Any) -> T:
            try:
                return decode(*args, **kwargs)
            except BodyError:
                raise
            except (TypeError, AttributeError, KeyError, ValueError) as exc:
                raise BodyError(
                    f"the {what} body has a value of the wrong type: {exc}",
                    response_code=ResponseCode.INVALID_PARAMETER,
                ) from None

        return checked

    return decorate


def to_int(raw: Any, name: str, what: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise BodyError(f"{what}: {name} is not an integer: {raw!r}") from None
