# The compiled helper of send_fast.py (_send_fast.c): what each function takes and gives.

from ...store.api import MessageToStore

def read_send(
    ext_fields: dict[str, str], names: tuple[str, ...], cluster: str, /
) -> tuple[str, int, int, int, int, int, bytes, bytes | None] | None: ...
def answer_frame(
    parts: tuple[bytes, ...],
    tail: bytes,
    store_host: bytes,
    commit_log_offset: int,
    queue_id: int,
    queue_offset: int,
    uniq: bytes | None,
    opaque: int,
    /,
) -> bytes | None: ...
def send_one(
    broker: object, ctx: object, request: object, refs: tuple[object, ...], /
) -> object: ...
def batch_messages(
    body: bytes,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    reconsume_times: int,
    batch_level: list[tuple[bytes, bytes, bytes]],
    most: int,
    message_type: type[MessageToStore],
    /,
) -> list[MessageToStore] | None: ...

# the fields of serve_sends' run tuple (send_frames.SendFrames._run)
RUN_FIELDS: int

def serve_sends(
    run: tuple[object, ...], source: bytes | bytearray, position: int, /
) -> tuple[
    int,
    bytes | None,
    dict[tuple[str, int], int] | None,
    bytes | None,
    tuple[Exception, int, int] | None,
    int,
    int,
    int,
    list[tuple[str, int, int]] | None,
]: ...
