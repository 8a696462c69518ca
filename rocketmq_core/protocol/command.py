"""RemotingCommand: one request or response, as the wire carries it (REMOTING.md §3)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from .codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    OUR_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
)

_INT32_MASK = 0x7FFFFFFF
# ext fields whose values repr never shows (logs print commands): an ACL account's
# secretKey (UPDATE_AND_CREATE_ACL_CONFIG), a session token, a request's signature
_SECRET_FIELDS = frozenset({"secretKey", "SecurityToken", "Signature"})
_MASK = "***"


class OpaqueSequence:
    """Request ids for one requester: non-negative int32s that wrap around."""

    __slots__ = ("_counter",)

    def __init__(self, start: int = 0) -> None:
        self._counter = itertools.count(start)

    def next(self) -> int:
        return next(self._counter) & _INT32_MASK


class RemotingCommand:
    """A request or a response.

    ``code`` is a plain int (a RequestCode for requests, a ResponseCode for responses)
    so that codes we do not know survive decoding. ``ext_fields`` always holds strings.
    ``serialize_type`` is the header encoding it arrived in, or should leave in.
    """

    __slots__ = (
        "body",
        "code",
        "ext_fields",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        *,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        language: int = LanguageCode.JAVA,
        version: int = OUR_VERSION,
        serialize_type: int = 0,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields if ext_fields is not None else {}
        self.body = body
        self.language = language
        self.version = version
        self.serialize_type = serialize_type

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        remark: str | None = None,
    ) -> RemotingCommand:
        """A request; its opaque is assigned when it is sent."""
        return cls(
            code,
            flag=FLAG_ONEWAY if oneway else 0,
            remark=remark,
            ext_fields=dict(ext_fields) if ext_fields else None,
            body=body,
        )

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque, same header encoding."""
        return RemotingCommand(
            code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields,
            body=body,
            serialize_type=self.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        name = _code_name(self.code, self.is_response)
        parts = [f"{kind} {name}", f"opaque={self.opaque}"]
        if self.is_oneway:
            parts.append("oneway")
        if self.remark:
            parts.append(f"remark={self.remark!r}")
        if self.ext_fields:
            shown = {
                key: _MASK if key in _SECRET_FIELDS else value
                for key, value in self.ext_fields.items()
            }
            parts.append(f"ext_fields={shown!r}")
        if self.body:
            parts.append(f"body={len(self.body)} bytes")
        return f"<RemotingCommand {' '.join(parts)}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable


def _code_name(code: int, is_response: bool) -> str:
    enum = ResponseCode if is_response else RequestCode
    try:
        return f"{enum(code).name}({code})"
    except ValueError:
        return str(code)
