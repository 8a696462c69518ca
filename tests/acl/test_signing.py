"""The signature (ACL.md §1): the worked example, and the per-request path (a prepared
HMAC key, values and body hashed without building the content) against the reference
``signature(signed_content(...))`` on requests of every shape, both with its compiled
helper (_signature.c) and with the Python code alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_core.acl import signing
from rocketmq_core.acl.signing import (
    UNIQUE_KEY_QUERY,
    Credentials,
    request_signature,
    sign,
    signature,
    signature_matches,
    signed_content,
)
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import CreateAccessConfigRequestHeader
from tests.acl.test_validator import WORKED_FIELDS


@pytest.fixture(params=["compiled", "python"], autouse=True)
def signature_path(request, monkeypatch):
    """Every test here runs with the compiled helper and with the Python code alone."""
    if request.param == "compiled":
        monkeypatch.setattr(signing, "COMPILED", compiled_helper())
    else:
        monkeypatch.setattr(signing, "COMPILED", None)
    return request.param


def compiled_helper():
    if signing.compiled is None:
        pytest.fail(
            "rocketmq_core.acl._signature is not built: reinstall rocketmq-core with a C compiler"
        )
    return signing.compiled


def test_the_worked_example_with_and_without_a_body():
    fields = dict(WORKED_FIELDS)
    with_body = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, b"Hello RocketMQ")
    assert request_signature(with_body, "12345678") == "eBQV3M2fG2r723N6TEve9zuZC/g="
    without = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(fields))
    assert request_signature(without, "12345678") == "MahpEiYRwFf6WiKY8Gkvzc14nd8="


def test_old_clients_leave_the_unique_key_query_unsigned_newer_ones_sign_it():
    fields = {"topic": "T", UNIQUE_KEY_QUERY: "true", "Signature": "x"}
    old = RemotingCommand.request(RequestCode.QUERY_MESSAGE, dict(fields))
    old.version = 399
    new = RemotingCommand.request(RequestCode.QUERY_MESSAGE, dict(fields))
    new.version = 400
    assert request_signature(old, "12345678") == signature(b"T", "12345678")
    assert request_signature(new, "12345678") == signature(b"trueT", "12345678")


@given(
    fields=st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=12),
    body=st.binary(max_size=300),
    secret=st.text(min_size=1, max_size=80),  # longer than a SHA-1 block too
    version=st.sampled_from([0, 399, 400, 473]),
)
def test_the_per_request_path_gives_the_reference_signature(fields, body, secret, version):
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(fields), body)
    request.version = version
    expected = signature(signed_content(fields, body, version=version), secret)
    assert request_signature(request, secret) == expected


@pytest.mark.parametrize(
    "fields",
    [
        # keys that differ in length only, in Latin-1 and beyond: code point order
        {"b": "1", "ab": "2", "a": "3", "a\x00": "4", "é": "5", "ÿ": "6", "Ā": "7", "😀": "8"},
        # values longer than the helper gathers into one buffer: hashed one by one
        {"topic": "T" * 700, "properties": "K\x01V\x02" * 200, "group": "é" * 300},
    ],
)
def test_key_order_and_long_values_give_the_reference_signature(fields):
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(fields), b"body")
    expected = signature(signed_content(fields, b"body", version=request.version), "secret")
    assert request_signature(request, "secret") == expected


def test_a_commands_repr_masks_secrets_signature_and_token():
    header = CreateAccessConfigRequestHeader(
        access_key="app-key-01", secret_key="the-new-secret", topic_perms="Orders=PUB"
    )
    request = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header.to_ext_fields()
    )
    sign(request, Credentials("admin-key-1", "admin-secret", security_token="the-token"))
    signature_value = request.ext_fields["Signature"]
    shown = repr(request)
    for secret in ("the-new-secret", signature_value, "the-token", "admin-secret"):
        assert secret not in shown
    for kept in ("'secretKey': '***'", "'Signature': '***'", "'SecurityToken': '***'"):
        assert kept in shown
    # what identifies the request stays readable
    assert "'accessKey': 'app-key-01'" in shown and "'AccessKey': 'admin-key-1'" in shown
    assert "'topicPerms': 'Orders=PUB'" in shown
    assert request.ext_fields["secretKey"] == "the-new-secret"  # only the text is masked


def test_what_the_compiled_helper_leaves_to_the_python_code(signature_path):
    helper = compiled_helper()
    keyed = compiled_helper().keyed(b"12345678")
    assert helper.signature({"topic": "T"}, b"body", False, keyed) == signature(
        b"Tbody", "12345678"
    )
    # a value that is not text, text UTF-8 cannot carry, a body in another buffer type
    assert helper.signature({"topic": 7}, b"", False, keyed) is None
    assert helper.signature({"topic": "\ud800"}, b"", False, keyed) is None
    assert helper.signature({"topic": "T"}, memoryview(b"body"), False, keyed) is None
    # the Python code then gives the answer (or the error) it always gave
    odd_body = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"})
    odd_body.body = memoryview(b"body")  # type: ignore[assignment]
    assert request_signature(odd_body, "12345678") == signature(b"Tbody", "12345678")
    unencodable = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "\ud800"})
    with pytest.raises(UnicodeEncodeError):
        request_signature(unencodable, "12345678")


def test_a_request_with_more_fields_than_the_helper_holds_is_signed_by_python(signature_path):
    fields = {f"field{number:03d}": str(number) for number in range(70)}
    keyed = compiled_helper().keyed(b"12345678")
    assert compiled_helper().signature(fields, b"", False, keyed) is None
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(fields), b"body")
    expected = signature(signed_content(fields, b"body"), "12345678")
    assert request_signature(request, "12345678") == expected


@given(
    fields=st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=12),
    body=st.binary(max_size=300),
    secret=st.text(min_size=1, max_size=80),
    tamper=st.sampled_from(["none", "body", "field", "signature"]),
)
def test_a_signed_request_matches_its_secret_and_nothing_tampered(fields, body, secret, tamper):
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(fields), body)
    sign(request, Credentials("the-access-key", secret))
    if tamper == "body":
        request.body = body + b"!"
    elif tamper == "field":
        request.ext_fields["AccessKey"] = "the-access-key!"
    elif tamper == "signature":
        given_signature = request.ext_fields["Signature"]
        request.ext_fields["Signature"] = ("B" if given_signature[0] == "A" else "A") + (
            given_signature[1:]
        )
    assert signature_matches(request, secret) is (tamper == "none")
    assert signature_matches(request, secret + "x") is False


@pytest.mark.parametrize("received", ["", "short=", "\u00e9" * 28, "A" * 29])
def test_a_signature_of_another_shape_is_a_mismatch_not_an_error(received):
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"}, b"body")
    request.ext_fields["Signature"] = received
    assert signature_matches(request, "12345678") is False


def test_the_compiled_comparison_leaves_odd_requests_to_the_python_code(signature_path):
    helper = compiled_helper()
    keyed = helper.keyed(b"12345678")
    good = signature(b"Tbody", "12345678")
    assert helper.matches({"topic": "T"}, b"body", False, keyed, good) is True
    assert helper.matches({"topic": "T"}, b"body!", False, keyed, good) is False
    assert helper.matches({"topic": 7}, b"body", False, keyed, good) is None
    assert helper.matches({"topic": "T"}, memoryview(b"body"), False, keyed, good) is None
    # a received signature of a str subclass: the Python code compares it
    assert (
        helper.matches({"topic": "T"}, b"body", False, keyed, type("Text", (str,), {})(good))
        is None
    )
    # anything but what keyed() gave is refused, bytes of any length included
    for not_a_key in (b"not a key", b"\xff" * 192, "12345678", None):
        with pytest.raises(TypeError, match="keyed"):
            helper.matches({"topic": "T"}, b"body", False, not_a_key, good)


@pytest.mark.parametrize("length", [0, 1, 63, 64, 65, 128, 129])
@pytest.mark.parametrize("body", [None, b"", b"x" * 1024])
def test_secrets_of_every_length_around_a_block_and_any_body(length, body):
    secret = "s" * length
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "T"}, body)
    expected = signature(signed_content({"topic": "T"}, body or b""), secret)
    assert request_signature(request, secret) == expected
    request.ext_fields["Signature"] = expected
    assert signature_matches(request, secret) is True
