# The compiled helper of signing.py (_signature.c): what its functions take and give.

def keyed(secret: bytes, /) -> bytes: ...
def signature(
    ext_fields: dict[str, str], body: bytes | None, skip_unique_key: bool, keyed: bytes, /
) -> str | None: ...
def matches(
    ext_fields: dict[str, str],
    body: bytes | None,
    skip_unique_key: bool,
    keyed: bytes,
    received: str,
    /,
) -> bool | None: ...
