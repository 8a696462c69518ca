# The compiled helper of signing.py (_signature.c): what its function takes and gives.

def signature(
    ext_fields: dict[str, str], body: bytes | None, skip_unique_key: bool, keyed: object, /
) -> str | None: ...
