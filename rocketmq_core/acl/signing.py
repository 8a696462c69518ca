"""How a request is signed and checked: HMAC-SHA1 over the sorted extFields' values and
the body, in Base64 (docs/spec/ACL.md §1). Clients sign with ``sign``; the broker
recomputes with ``signature`` and compares."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
from dataclasses import dataclass
from types import ModuleType

from ..protocol.command import RemotingCommand

compiled: ModuleType | None
try:  # built by setup.py where a C compiler is; request_signature does the same work
    from . import _signature as compiled
except ImportError:
    compiled = None
# the compiled helper when built; ROCKETMQ_SIGNATURE_COMPILED=0 runs the Python code instead
COMPILED = compiled if os.environ.get("ROCKETMQ_SIGNATURE_COMPILED", "1") != "0" else None

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
# clients up to 4.9.3 did not sign it; their requests carry version <= 399 (V4_9_3)
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY = 399


@dataclass(frozen=True)
class Credentials:
    """An account's keys; ``security_token`` is passed along, never checked."""

    access_key: str
    secret_key: str
    security_token: str = ""

    def __repr__(self) -> str:  # never print the secret
        return f"Credentials(access_key={self.access_key!r})"


def signed_content(ext_fields: dict[str, str], body: bytes, *, version: int = 0) -> bytes:
    """The bytes a signature covers: every extField's value but the signature's, in key
    order, then the body."""
    skip = {SIGNATURE}
    if version <= LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY:
        skip.add(UNIQUE_KEY_QUERY)
    values = "".join(ext_fields[key] for key in sorted(ext_fields) if key not in skip)
    return values.encode() + body


def signature(content: bytes, secret_key: str) -> str:
    """Base64 of HMAC-SHA1(secret, content): 28 characters."""
    digest = hmac.new(secret_key.encode(), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def request_signature(request: RemotingCommand, secret_key: str) -> str:
    """The Signature ``request`` carries when signed with ``secret_key``: ``signature`` of
    ``signed_content``, without building the content (values and body are hashed as they
    are) and with the key's HMAC state prepared once per secret."""
    fields = request.ext_fields
    skip_unique_key = request.version <= LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY
    if COMPILED is not None:
        computed = COMPILED.signature(
            fields, request.body, skip_unique_key, compiled_key(secret_key)
        )
        if computed is not None:
            return computed
    keyed = _keyed_hmac(secret_key).copy()
    keyed.update(
        "".join(
            [
                fields[key]
                for key in sorted(fields)
                if key != SIGNATURE and not (skip_unique_key and key == UNIQUE_KEY_QUERY)
            ]
        ).encode()
    )
    if request.body:
        keyed.update(request.body)
    return base64.b64encode(keyed.digest()).decode("ascii")


@functools.lru_cache(maxsize=4096)
def _keyed_hmac(secret_key: str) -> hmac.HMAC:
    """HMAC-SHA1 keyed with ``secret_key``, nothing hashed yet: each signature starts from
    a copy (the key's two padded blocks are hashed here once, not per request)."""
    return hmac.new(secret_key.encode(), digestmod=hashlib.sha1)


@functools.lru_cache(maxsize=4096)
def compiled_key(secret_key: str) -> object:
    """The compiled helper's prepared HMAC key for ``secret_key`` (hashed once); call it
    only where COMPILED is set."""
    return COMPILED.keyed(secret_key.encode())  # type: ignore[union-attr]


def sign(request: RemotingCommand, credentials: Credentials) -> None:
    """Add AccessKey (and SecurityToken) and the Signature to a request about to be sent."""
    fields = request.ext_fields
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = request_signature(request, credentials.secret_key)


def signature_matches(request: RemotingCommand, secret_key: str) -> bool:
    """The request's Signature is the one ``secret_key`` gives (exact string compare, in
    constant time)."""
    received = request.ext_fields.get(SIGNATURE)
    if received is None:
        return False
    if COMPILED is not None:
        skip_unique_key = request.version <= LAST_VERSION_WITHOUT_SIGNED_UNIQUE_KEY
        verdict = COMPILED.matches(
            request.ext_fields, request.body, skip_unique_key, compiled_key(secret_key), received
        )
        if verdict is not None:
            return verdict
    if not received.isascii():  # compare_digest takes ASCII text only; ours always is
        return False
    return hmac.compare_digest(received, request_signature(request, secret_key))
