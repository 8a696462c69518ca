"""Stored-message records for tests, packed by the store's own writer."""

from __future__ import annotations

from ..protocol.message import (
    BORNHOST_V6,
    STOREHOST_V6,
    body_crc,
    host_is_v6,
    record_size,
    write_record,
)


def record_bytes(
    *,
    body: bytes,
    topic: bytes,
    properties: bytes,
    born_host: bytes,
    store_host: bytes,
    sys_flag: int = 0,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    born_timestamp: int = 1700000000000,
    store_timestamp: int = 1700000000005,
    reconsume_times: int = 0,
) -> bytes:
    """One whole record; the host flags of ``sys_flag`` follow the hosts' sizes."""
    born_v6, store_v6 = host_is_v6(born_host), host_is_v6(store_host)
    sys_flag |= (BORNHOST_V6 if born_v6 else 0) | (STOREHOST_V6 if store_v6 else 0)
    size = record_size(len(body), len(topic), len(properties), born_v6, store_v6)
    buffer = bytearray(size)
    write_record(
        buffer,
        0,
        size=size,
        body=body,
        body_crc=body_crc(body),
        topic=topic,
        properties=properties,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=0,
    )
    return bytes(buffer)
