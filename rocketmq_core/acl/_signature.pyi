# The compiled helper of signing.py (_signature.c): what its functions take and give.
# ``keyed`` gives an opaque capsule holding the prepared key; the others take it back.

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
