# The compiled helper of signing.py (_signature.c): what its functions take and give.
# ``keyed`` gives an opaque capsule holding the prepared key; the others take it back.

from collections.abc import Callable
from typing import Any

# a capsule holding _signature_api.h's SignatureApi, for other compiled modules
API: object

def keyed(secret: bytes, /) -> object: ...
def signature(
    ext_fields: dict[str, str], body: bytes | None, skip_unique_key: bool, keyed: object, /
) -> str | None: ...
def matches(
    ext_fields: dict[str, str],
    body: bytes | None,
    skip_unique_key: bool,
    keyed: object,
    received: str,
    /,
) -> bool | None: ...
def before_request(
    signing_keys: dict[str, object],
    deciding_fields: dict[int, tuple[str, str]],
    verdicts: dict[tuple[object, ...], str | None],
    check: Callable[[Any, Any], Any],
    context: Any,
    request: Any,
    /,
) -> Any: ...
