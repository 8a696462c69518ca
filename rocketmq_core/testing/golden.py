"""Golden frames: exact bytes every codec change must still read and write.

``captured_frames()`` are requests recorded on loopback from the official C++ client
(PyPI ``rocketmq==0.4.4``, rocketmq-client-cpp 1.2.3). ``reference_frames()`` are
frames written out here from REMOTING.md, one per header form and quirk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class GoldenFrame:
    name: str
    frame: bytes  # the whole frame, length prefix included
    code: int
    opaque: int
    flag: int
    source: str
    ext_fields: dict | None = None
    body: bytes | None = None
    remark: str | None = None


def captured_frames() -> list[GoldenFrame]:
    """Requests the C++ client sent (route query, send, consumer heartbeat)."""
    text = resources.files(__package__).joinpath("golden/cpp_client_1.2.3_requests.jsonl")
    frames = []
    for line in text.read_text().splitlines():
        record = json.loads(line)
        frame = bytes.fromhex(record["frame_hex"])
        header = json.loads(frame[8 : 8 + int.from_bytes(frame[4:8], "big")])
        frames.append(
            GoldenFrame(
                name=f"cpp-1.2.3 {record['name']}",
                frame=frame,
                code=record["code"],
                opaque=header["opaque"],
                flag=header["flag"],
                source=record["client"],
            )
        )
    return frames


def _frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    length = 4 + len(header) + len(body)
    return (
        length.to_bytes(4, "big")
        + (serialize_type << 24 | len(header)).to_bytes(4, "big")
        + header
        + body
    )


def _binary_header(code, language, version, opaque, flag, remark: bytes, fields: list) -> bytes:
    block = b"".join(
        len(k).to_bytes(2, "big") + k + len(v).to_bytes(4, "big") + v for k, v in fields
    )
    return (
        code.to_bytes(2, "big", signed=True)
        + bytes([language])
        + version.to_bytes(2, "big", signed=True)
        + opaque.to_bytes(4, "big", signed=True)
        + flag.to_bytes(4, "big", signed=True)
        + len(remark).to_bytes(4, "big")
        + remark
        + len(block).to_bytes(4, "big")
        + block
    )


def reference_frames() -> list[GoldenFrame]:
    """Frames built by hand from REMOTING.md §2, §5 and §6."""
    java_pull_response = (
        b'{"code":19,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"10",'
        b'"minOffset":"0","maxOffset":"10"},"flag":1,"language":"JAVA","opaque":8,'
        b'"remark":"OFFSET_OVERFLOW_ONE","serializeTypeCurrentRPC":"JSON","version":479}'
    )
    cpp_pull = (
        b'{"code":11,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x",'
        b'"commitOffset":"0","consumerGroup":"G","maxMsgNums":32,"queueId":1,'
        b'"queueOffset":"5","subVersion":"1","subscription":"*","suspendTimeoutMillis":"15000",'
        b'"sysFlag":6,"topic":"T"},"flag":0,"language":"CPP","opaque":7,"remark":"",'
        b'"version":63}\n'
    )
    binary_send = _binary_header(
        310,
        0,
        409,
        42,
        0,
        b"",
        [(b"a", b"PG"), (b"b", b"TopicTest"), (b"e", b"3"), (b"m", b"true")],
    )
    binary_error = _binary_header(1, 0, 409, 43, 1, "bad \u00e9".encode(), [])
    return [
        GoldenFrame(
            "java 5.x pull response (JSON, no trailing newline)",
            _frame(0, java_pull_response),
            19,
            8,
            1,
            "REMOTING.md §5.1",
            ext_fields={
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": "10",
                "minOffset": "0",
                "maxOffset": "10",
            },
            remark="OFFSET_OVERFLOW_ONE",
        ),
        GoldenFrame(
            "cpp pull request (numbers where strings are expected)",
            _frame(0, cpp_pull),
            11,
            7,
            0,
            "REMOTING.md §5.2, CODES.md §3.4",
            ext_fields={
                "AccessKey": "",
                "OnsChannel": "ALIYUN",
                "Signature": "x",
                "commitOffset": "0",
                "consumerGroup": "G",
                "maxMsgNums": "32",
                "queueId": "1",
                "queueOffset": "5",
                "subVersion": "1",
                "subscription": "*",
                "suspendTimeoutMillis": "15000",
                "sysFlag": "6",
                "topic": "T",
            },
            remark="",
        ),
        GoldenFrame(
            "java binary SEND_MESSAGE_V2 with a body",
            _frame(1, binary_send, b"hello"),
            310,
            42,
            0,
            "REMOTING.md §6",
            ext_fields={"a": "PG", "b": "TopicTest", "e": "3", "m": "true"},
            body=b"hello",
        ),
        GoldenFrame(
            "java binary error response with a UTF-8 remark",
            _frame(1, binary_error),
            1,
            43,
            1,
            "REMOTING.md §6",
            ext_fields={},
            remark="bad \u00e9",
        ),
    ]


def all_frames() -> list[GoldenFrame]:
    return captured_frames() + reference_frames()
