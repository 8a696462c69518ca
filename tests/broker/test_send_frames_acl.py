"""Runs of sends with ACL on (send_frames.py; _send_fast.c's frame check): a run answers
a frame only where the guard's compiled check would certainly allow the request (signed
right by an account it decides, a verdict kept as allowed for its topic and group);
every other frame goes on to the guard, which answers it as ever. The check reads the
header in place, so it is held here to the guard's check of the decoded request, for
headers of every shape, and on a real broker to the general path's answers and bytes."""

from __future__ import annotations

import json
import os
import re

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_core.acl import signing
from rocketmq_core.acl.addresses import peer_ip
from rocketmq_core.acl.guard import AclGuard
from rocketmq_core.acl.permissions import BROKER_ADMIN_CODES
from rocketmq_core.acl.signing import Credentials, request_signature, sign
from rocketmq_core.acl.validator import AclValidator
from rocketmq_core.broker.app import Broker
from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codec import decode_json_header
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.constants import PERM_RW
from rocketmq_core.remoting.processor import RequestContext
from rocketmq_core.testing.broker import broker_config
from tests.acl.test_compiled_hook import rules

from .test_send_fast_path import connected, send
from .test_send_frames import (
    _CANONICAL_HEADER,
    _expected,
    canonical_fields,
    codes,
    frames_against_general,
    headers,
    send_all,
    serve_frames,
    serve_one,
    v1_fields,
)
from .test_send_frames_batches import batch

pytestmark = pytest.mark.anyio

ACCOUNT = Credentials("plain-key", "plain-secret")  # tests/acl/test_compiled_hook's account
CONTEXT = RequestContext(connection=None, peer_address="10.1.1.1:40000", local_address="x:1")
PEER = peer_ip(CONTEXT.peer_address)
UNDECIDED = object()  # what the compiled hook's stand-in for the guard answers


@pytest.fixture(autouse=True)
def compiled_helpers():
    if signing.COMPILED is None:
        pytest.fail("rocketmq_core.acl._signature is not built")


def validator_for(topic_perm: str = "PUB") -> AclValidator:
    """Rules whose one decided account may use topic Orders as ``topic_perm`` says."""
    return AclValidator(rules(topic_perm, "SUB", []), admin_codes=BROKER_ADMIN_CODES)


def with_fields(text: str, members: str) -> str:
    """``text`` (a header) with ``members`` (JSON members and a comma) first in its
    extFields."""
    return re.sub(r'"extFields":\s*\{', lambda found: found.group(0) + members, text, count=1)


def signed(
    text: str, body: bytes, secret: str = ACCOUNT.secret_key, as_version: int | None = None
) -> str:
    """``text`` with the Signature the decoded request with ``body`` has with ``secret``
    (signed as a client of ``as_version`` signs, when given)."""
    command = decode_json_header(text.encode())
    command.body = body
    if as_version is not None:
        command.version = as_version
    return with_fields(text, f'"Signature":"{request_signature(command, secret)}",')


def header_text(fields: dict | None = None, **top) -> str:
    """A send's header as a client writes it, with the account's AccessKey, unsigned."""
    return json.dumps(
        {"code": 310, "extFields": {**(fields or canonical_fields()), "AccessKey": "plain-key"},
         "flag": 0, "language": "JAVA", "opaque": 9, "version": 479, **top},
        separators=(",", ":"),
    )  # fmt: skip


def signed_header(fields: dict | None = None, body: bytes = b"body", **top) -> str:
    """A send's header signed by the account."""
    return signed(header_text(fields, **top), body)


def allowed_by_the_guard(validator: AclValidator, text: str, body: bytes) -> bool:
    """The guard's check of the decoded request (keeping its verdict), then whether the
    compiled hook passes it without asking the guard: what a run may serve."""
    command = decode_json_header(text.encode())
    command.body = body
    AclGuard(lambda: validator).check(CONTEXT, command)
    hook = validator.compiled_hook(lambda _context, _request: UNDECIDED)
    assert hook is not None
    return hook(CONTEXT, command) is None


def served(validator: AclValidator, text: str, body: bytes = b"body") -> bool:
    position, put, _ = serve_one(text.encode(), body, validator.frame_check(PEER))
    assert bool(put) == (position > 0)
    return position > 0


# --- the frame check against the guard, one frame at a time -------------------------------


def test_a_signed_send_is_served_once_its_verdict_is_kept():
    validator = validator_for()
    text = signed_header()
    assert not served(validator, text)  # no verdict yet: the guard's first
    assert allowed_by_the_guard(validator, text, b"body")
    assert served(validator, text)
    assert served(validator, signed_header(canonical_fields(e=2), body=b"other"), b"other")


@pytest.mark.parametrize(
    "change",
    ["wrong secret", "body changed", "value changed", "no signature", "no access key",
     "stranger", "duplicate key"],
)  # fmt: skip
def test_a_frame_the_check_cannot_pass_goes_to_the_guard(change):
    validator = validator_for()
    assert allowed_by_the_guard(validator, signed_header(), b"body")
    body = b"body"
    if change == "wrong secret":
        text = signed(header_text(), body, "another secret")
    elif change == "body changed":
        text, body = signed_header(), b"changed"
    elif change == "value changed":
        text = signed_header().replace('"e":1', '"e":2')
    elif change == "no signature":
        text = re.sub(r'"Signature":"[^"]*",', "", signed_header())
    elif change == "no access key":
        text = signed_header().replace('"AccessKey":"plain-key"', '"AccessKey":null')
    elif change == "stranger":
        text = signed_header().replace('"AccessKey":"plain-key"', '"AccessKey":"stranger"')
    else:  # the codec keeps the last of a key twice; the guard decides such a frame
        text = with_fields(signed_header(), '"AccessKey":"plain-key",')
        assert allowed_by_the_guard(validator, text, body)
    assert not served(validator, text, body)


@pytest.mark.parametrize("change", ["wrong secret", "denied topic", "stranger"])
def test_after_a_frame_served_the_next_is_checked_afresh(change):
    """A run keeps the account and verdict of the frame before: the next frame's
    signature is checked all the same, and another resource's verdict looked up."""
    validator = validator_for()
    allowed = signed_header()
    assert allowed_by_the_guard(validator, allowed, b"body")
    if change == "wrong secret":
        second = signed(header_text(), b"body", "another secret")
    elif change == "denied topic":  # signed right; the account may not use it
        second = signed_header(canonical_fields(b="Refunds"))
        assert not allowed_by_the_guard(validator, second, b"body")  # refused, and kept so
    else:
        second = signed(header_text().replace('"plain-key"', '"stranger"'), b"body", "x")
    frames = [(allowed.encode(), b"body"), (second.encode(), b"body")]
    position, put, _ = serve_frames(frames, validator.frame_check(PEER))
    assert len(put) == 1 and position == len(allowed) + 4 + 4 + 4  # the first frame only
    position, put, _ = serve_frames(frames[::-1], validator.frame_check(PEER))
    assert position == 0 and not put


def test_a_denied_topic_is_the_guards():
    validator = validator_for("DENY")
    text = signed_header()
    assert not allowed_by_the_guard(validator, text, b"body")  # refused, and kept so
    assert not served(validator, text)


def test_an_account_with_a_white_list_elsewhere_is_checked_white_listed_is_the_guards():
    """An account whose own white list takes the connection's peer skips the signature
    (the guard's alone); one whose list does not is checked as any other."""
    validator = validator_for()
    guard = AclGuard(lambda: validator)
    for access_key, secret, runs_decide in (
        ("elsewhere", "elsewhere-secret", True),  # white list 10.9.*.*
        ("white-key", "white-secret", False),  # white list 10.1.1.*, this peer's
    ):
        text = header_text().replace('"plain-key"', f'"{access_key}"')
        text = signed(text, b"body", secret)
        command = decode_json_header(text.encode())
        command.body = b"body"
        assert guard.check(CONTEXT, command) is None  # allowed, its verdict kept
        assert served(validator, text) is runs_decide, access_key
    assert validator.frame_check(PEER) is validator.frame_check(PEER)  # kept per peer


@pytest.mark.parametrize(
    "shape",
    ["send v1", "escaped key", "numbers", "nulls", "old client, unique key unsigned",
     "new client, unique key signed", "no version", "empty body"],
)  # fmt: skip
def test_every_usual_shape_of_a_signed_send_is_served(shape):
    validator = validator_for()
    fields, top, body = canonical_fields(), {}, b"body"
    if shape == "send v1":
        fields, top = v1_fields(fields), {"code": RequestCode.SEND_MESSAGE}
    elif shape == "numbers":
        fields |= {"g": 1700000000000, "h": 5, "j": 0}
    elif shape == "nulls":
        fields |= {"m": None, "zz": None}
    elif shape.startswith("old client"):
        fields, top = fields | {"_UNIQUE_KEY_QUERY": "true"}, {"version": 399}
    elif shape.startswith("new client"):
        fields, top = fields | {"_UNIQUE_KEY_QUERY": "true"}, {"version": 479}
    elif shape == "empty body":
        body = b""
    text = signed_header(fields, body, **top)
    if shape == "escaped key":
        text = text.replace('"AccessKey"', '"\\u0041ccessKey"')
    elif shape == "no version":
        text = signed(re.sub(r',"version":\d+', "", header_text(fields, **top)), body)
    assert allowed_by_the_guard(validator, text, body)
    assert served(validator, text, body)


@settings(max_examples=int(os.environ.get("SERVE_EXAMPLES", "400")), deadline=None)
@given(
    header=st.one_of(headers(), st.just(json.dumps(_CANONICAL_HEADER).encode())),
    how=st.sampled_from(
        ["right"] * 3 + ["wrong secret", "body changed", "unsigned", "as an old client"]
    ),
    access_key=st.sampled_from(['"plain-key"'] * 3 + ['"stranger"', "null", None]),
    extra=st.lists(st.sampled_from(['"_UNIQUE_KEY_QUERY":"true",', '"version":399,']), max_size=2),
    topic_perm=st.sampled_from(["PUB", "PUB", "DENY"]),
)
def test_a_frame_is_served_only_where_the_guard_allows_it(
    header, how, access_key, extra, topic_perm
):
    text = header.decode("utf-8", "surrogateescape")
    if access_key is not None:
        text = with_fields(text, f'"AccessKey":{access_key},')
    for members in extra:  # the top level's version or an extFields member
        if "version" in members:
            text = text.replace("{", "{" + members, 1)
        else:
            text = with_fields(text, members)
    body = b"body"
    validator = validator_for(topic_perm)
    try:
        # the same request signed right first: a verdict is kept for its resources
        allowed_by_the_guard(validator, signed(text, body), body)
        if how == "as an old client":  # the unique-key field left out whatever the version
            text = signed(text, body, as_version=399)
        elif how != "unsigned":
            text = signed(text, body, "wrong" if how == "wrong secret" else ACCOUNT.secret_key)
        command = decode_json_header(text.encode("utf-8", "surrogateescape"))
    except (RemoteProtocolError, UnicodeError):
        command = None
    if how == "body changed":
        body = b"changed"
    guard_allows = command is not None and allowed_by_the_guard(validator, text, body)
    if served(validator, text, body):
        assert guard_allows, f"served a frame the guard does not pass: {text!r}"
        assert _expected(text.encode()) is not None


# --- on a broker: the same answers and bytes as the general path -------------------------

ACL_RULES = (
    "accounts:\n  - accessKey: plain-key\n    secretKey: plain-secret\n"
    "    defaultTopicPerm: DENY\n    topicPerms: [Orders={perm}]\n"
)


def acl_home(tmp_path, perm: str = "PUB"):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL_RULES.format(perm=perm))
    return home


def signed_send(**options):
    request = send(**options)
    sign(request, ACCOUNT)
    return request


async def test_with_acl_runs_answer_and_store_as_the_general_path(
    tmp_path,
    plugin_host,
    monkeypatch,
    runs,
):
    def requests():
        unsigned, stranger = send(body=b"unsigned"), send(body=b"stranger")
        sign(stranger, Credentials("stranger", "x"))
        wrong = send(body=b"wrong")
        sign(wrong, Credentials(ACCOUNT.access_key, "not the secret"))
        denied = signed_send(topic="Tagged", body=b"denied")
        usual = [signed_send(body=b"%d" % n, queue_id=n % 4) for n in range(20)]
        return [*usual[:10], unsigned, stranger, wrong, denied, *usual[10:]]

    home = acl_home(tmp_path)
    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, acl_enable=True, rocketmq_home=str(home)
    )
    assert (
        codes(answers)
        == [ResponseCode.SUCCESS] * 10
        + [ResponseCode.SYSTEM_ERROR] * 4
        + [ResponseCode.SUCCESS] * 10
    )
    # the first send (no verdict yet) and each queue's first put are the guard's and the
    # general path's; the refused ones are the guard's
    assert runs.served == 16


async def test_written_at_once_signed_sends_are_runs(tmp_path, plugin_host, runs):
    config = broker_config(tmp_path, acl_enable=True, rocketmq_home=str(acl_home(tmp_path)))
    async with Broker.serving(config, host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        async with connected(broker) as peer:
            first = [signed_send(queue_id=n) for n in range(4)]  # verdict and queues: the guard's
            assert set(codes(await send_all(peer, first))) == {ResponseCode.SUCCESS}
            runs.served = 0
            answers = await send_all(peer, [signed_send(queue_id=n % 4) for n in range(64)])
    assert set(codes(answers)) == {ResponseCode.SUCCESS}
    assert runs.served == 64


async def test_signed_batches_are_runs_and_answer_as_the_general_path(
    tmp_path, plugin_host, monkeypatch, runs
):
    def requests():
        batches = [batch(n % 4 + 1, queue_id=n % 4) for n in range(12)]
        batches.insert(6, batch(topic="Tagged"))  # signed right, a topic the account may not use
        for request in batches:
            sign(request, ACCOUNT)
        return batches

    home = acl_home(tmp_path)
    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, acl_enable=True, rocketmq_home=str(home)
    )
    assert (
        codes(answers)
        == [ResponseCode.SUCCESS] * 6 + [ResponseCode.SYSTEM_ERROR] + [ResponseCode.SUCCESS] * 6
    )
    assert runs.served == 12 - 4  # but the first (no verdict yet) and the queues' first


async def test_runs_follow_the_rules_as_they_are_reloaded(
    tmp_path,
    plugin_host,
    runs,
):
    home = acl_home(tmp_path)
    config = broker_config(
        tmp_path, acl_enable=True, rocketmq_home=str(home), acl_file_watch_interval=50
    )
    async with Broker.serving(config, host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        async with connected(broker) as peer:
            for _ in range(3):
                assert codes(await send_all(peer, [signed_send(queue_id=0)])) == [0]
            assert runs.served == 2  # the first was the guard's (no verdict kept yet)
            acl_home(tmp_path, perm="DENY")
            with anyio.fail_after(10):
                while codes(await send_all(peer, [signed_send(queue_id=0)])) == [0]:
                    await anyio.sleep(0.05)
            served = runs.served
            answers = await send_all(peer, [signed_send(queue_id=0) for _ in range(8)])
    assert set(codes(answers)) == {ResponseCode.SYSTEM_ERROR}
    assert runs.served == served  # none of them a run's
