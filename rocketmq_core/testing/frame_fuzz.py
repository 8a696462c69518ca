"""A seeded mutator of request frames: what a hostile or broken client might send.

Every case starts from a plausible request for one request code: the golden frames'
fields and bodies, plus a value for every field any request header declares (each
processor reads the ones it needs), and a body of the kind that code carries. Then one
to three mutations change header fields (ints beyond int32/int64, negative, not a
number, huge strings, bad UTF-8) or the body (deeply nested JSON, wrong JSON types,
cut short, bad UTF-8, huge, random bytes). The same seed gives the same cases, so a
failure found by the soak run is replayed by its seed.

Used by the fuzz test (in process, against the processor table of a real broker) and
by ``benchmarks/fuzz_frames.py`` (over TCP, against ``rocketmq standalone``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from ..errors import RemoteProtocolError
from ..protocol import fastjson, headers
from ..protocol.codec import FrameDecoder, encode_command
from ..protocol.codes import FLAG_RESPONSE, RequestCode
from ..protocol.command import RemotingCommand
from ..protocol.message import BatchItem, encode_batch
from .golden import all_frames

# Stands for invalid UTF-8 in a header: JSON cannot carry it, so the encoded frame's
# bytes are patched after encoding.
BAD_UTF8_MARK = "BAD-UTF8-PLACEHOLDER"
BAD_UTF8 = b"\xc3\x28\xff\xfe"
DEEP = 3_000  # brackets: three times Python's recursion limit, yet a small body

_LOCK_BODY = {
    "consumerGroup": "GID_fuzz",
    "clientId": "127.0.0.1@fuzz",
    "onlyThisBroker": True,
    "mqSet": [{"topic": "TopicTest", "brokerName": "broker-a", "queueId": 0}],
}
_SUBSCRIPTION_GROUP = {"groupName": "GID_fuzz", "consumeEnable": True, "retryMaxTimes": 3}
_ROUTE = {
    "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}],
    "brokerDatas": [
        {"cluster": "c", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}}
    ],
}
_REGISTER = {
    "topicConfigSerializeWrapper": {
        "topicConfigTable": {"TopicTest": {"topicName": "TopicTest", "readQueueNums": 4}},
        "dataVersion": {"counter": 1, "timestamp": 1},
    },
    "filterServerList": [],
}


def _json_bodies() -> list[bytes]:
    bodies = [orjson.dumps(value) for value in (_LOCK_BODY, _SUBSCRIPTION_GROUP, _ROUTE)]
    bodies.append(orjson.dumps(_REGISTER))
    bodies.extend(command.body for command in _golden() if command.body)
    return [body for body in bodies if _is_json(body)]


def _is_json(body: bytes) -> bool:
    try:
        fastjson.loads(body)
    except ValueError:
        return False
    return True


def _golden() -> list[RemotingCommand]:
    """The golden frames' requests, decoded."""
    commands = []
    for golden in all_frames():
        try:
            commands.extend(FrameDecoder().feed(golden.frame))
        except RemoteProtocolError:
            continue  # a frame kept to prove a refusal
    return [command for command in commands if not command.flag & FLAG_RESPONSE]


def _base_fields() -> dict[str, str]:
    """A valid-looking value for every wire name any request header declares."""
    fields: dict[str, str] = {}
    kinds = {headers._STR: "TopicTest", headers._INT: "1", headers._BOOL: "false"}
    for header in vars(headers).values():
        if isinstance(header, type) and issubclass(header, headers.CustomHeader):
            for _attribute, wire_name, kind, _required in header._fields:
                fields.setdefault(wire_name, kinds.get(kind, "1"))
    for attribute, short in headers.SEND_V2_NAMES.items():
        fields[short] = fields.get(headers.camel_case(attribute), "1")
    for command in _golden():
        fields.update(command.ext_fields or {})
    fields.update(producerGroup="PID_fuzz", consumerGroup="GID_fuzz", a="PID_fuzz")
    fields.update(b="TopicTest", topic="TopicTest", queueId="0", e="0", batch="false")
    return fields


@dataclass
class FuzzCase:
    """One mutated request and the mutations that made it (for a failure message)."""

    command: RemotingCommand
    mutations: list[str]
    bad_utf8_header: bool = False

    def frame(self) -> bytes:
        data = encode_command(self.command)
        if self.bad_utf8_header:
            # keep the frame's lengths right: the patch replaces the mark byte for byte
            data = data.replace(BAD_UTF8_MARK.encode(), BAD_UTF8.ljust(len(BAD_UTF8_MARK), b"x"))
        return data

    def describe(self) -> str:
        return f"code {self.command.code}: {'; '.join(self.mutations)}"


class FrameMutator:
    """Mutated requests for ``codes``, reproducible from ``seed``."""

    def __init__(self, codes: list[int], seed: int = 0) -> None:
        self.codes = sorted(codes)
        self.random = random.Random(seed)
        self.fields = _base_fields()
        self.json_bodies = _json_bodies()
        batch = [BatchItem(0, b"x" * 8, b"KEYS\x01k\x02") for _ in range(3)]
        self.binary_bodies = [encode_batch(batch), b"hello", b"maxMessageSize=1024\n"]

    def cases(self, count: int) -> Iterator[FuzzCase]:
        for opaque in range(count):
            yield self.case(opaque)

    def case(self, opaque: int = 0) -> FuzzCase:
        pick = self.random
        code = pick.choice(self.codes)
        fields = dict(self.fields)
        if code == RequestCode.SEND_BATCH_MESSAGE:
            fields.update(batch="true", m="true")
        body = pick.choice([*self.json_bodies, *self.binary_bodies, b""])
        case = FuzzCase(RemotingCommand(code, opaque=opaque, ext_fields=fields), [])
        for _ in range(pick.randint(1, 3)):
            if pick.random() < 0.5:
                self._mutate_field(case, fields)
            else:
                body = self._mutate_body(case, body)
        case.command.body = body
        return case

    def _mutate_field(self, case: FuzzCase, fields: dict[str, str]) -> None:
        pick = self.random
        name = pick.choice(list(fields))
        kind = pick.randrange(10)
        if kind == 9:
            del fields[name]
            case.mutations.append(f"field {name} removed")
            return
        if kind == 8:
            case.bad_utf8_header = True
            fields[name] = BAD_UTF8_MARK
            case.mutations.append(f"field {name} bad UTF-8")
            return
        value = [
            str(2**31),
            str(2**63),
            str(-(2**31) - 1),
            str(-(2**63) - pick.randint(1, 9)),
            str(-pick.randint(1, 2**40)),
            pick.choice(["abc", "", " ", "1.5", "NaN", "0x10", "true"]),
            "9" * pick.choice([20, 400, 5000]),
            pick.choice(["x", "\u00e9", "{", "\x00"]) * pick.choice([300, 300, 300, 20_000]),
        ][kind]
        fields[name] = value
        case.mutations.append(f"field {name} = {value[:24]!r}{'...' if len(value) > 24 else ''}")

    def _mutate_body(self, case: FuzzCase, body: bytes) -> bytes:
        pick = self.random
        makers = [
            ("deep arrays", lambda: b"[" * DEEP + b"]" * DEEP),
            ("deep objects", lambda: b'{"a":' * DEEP + b"1" + b"}" * DEEP),
            ("deep unclosed", lambda: pick.choice([b"[", b'{"x":']) * DEEP),
            ("wrong JSON types", lambda: fastjson.dumps(self._wrong_types())),
            ("cut short", lambda: body[: pick.randrange(len(body))] if body else b"{"),
            ("bad UTF-8", lambda: _splice(pick, body or b'{"a":"b"}', BAD_UTF8)),
            ("huge", lambda: b"x" * (1 << 20 if pick.random() < 0.02 else 20_000)),
            ("random bytes", lambda: pick.randbytes(pick.randint(1, 512))),
            ("flipped bytes", lambda: _flip(pick, body or b"{}")),
        ]
        name, make = makers[pick.randrange(len(makers))]
        result = make()
        case.mutations.append(f"body {name} ({len(result)} bytes)")
        return result

    def _wrong_types(self) -> object:
        """A plausible body with its values swapped for other JSON types."""
        pick = self.random
        template = fastjson.loads(pick.choice(self.json_bodies))
        odd = [None, 1, -1, 2**63, 1.5, "x", [], {}, [1, "a"], {"k": [None]}, True]
        if not isinstance(template, dict):
            return pick.choice(odd)
        return {key: pick.choice([value, *odd]) for key, value in template.items()}


def _splice(pick: random.Random, data: bytes, insert: bytes) -> bytes:
    at = pick.randrange(len(data) + 1)
    return data[:at] + insert + data[at:]


def _flip(pick: random.Random, data: bytes) -> bytes:
    mutable = bytearray(data)
    for _ in range(pick.randint(1, 4)):
        mutable[pick.randrange(len(mutable))] = pick.randrange(256)
    return bytes(mutable)


def registered_codes(*tables) -> list[int]:
    """Every request code the given processor tables route."""
    return sorted({code for table in tables for code in table.codes()})
