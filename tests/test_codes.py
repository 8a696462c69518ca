"""Every code in docs/spec/CODES.md has its name and number in protocol/codes.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocketmq_core.protocol.codes import LanguageCode, RequestCode, ResponseCode

SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec" / "CODES.md"
ROW = re.compile(r"^\|\s*(-?\d+)\s*\|\s*([A-Z][A-Z0-9_]+)\s*\|", re.MULTILINE)


@pytest.fixture(scope="module")
def spec_text() -> str:
    return SPEC.read_text(encoding="utf-8")


def sections(text: str) -> tuple[str, str]:
    requests, rest = text.split("## 2. ResponseCode table", 1)
    responses = rest.split("\n## 3.", 1)[0]
    return requests, responses


def test_every_request_code_of_the_spec(spec_text):
    requests, _ = sections(spec_text)
    rows = ROW.findall(requests)
    assert len(rows) > 60
    for number, name in rows:
        assert RequestCode[name] == int(number), name


def test_every_response_code_of_the_spec(spec_text):
    _, responses = sections(spec_text)
    rows = ROW.findall(responses)
    assert len(rows) >= 40
    for number, name in rows:
        assert ResponseCode[name] == int(number), name


def test_codes_named_in_ranges_and_prose():
    for name, number in [
        ("ACK_MESSAGE", 200051),
        ("POP_ROLLBACK", 200056),
        ("BATCH_ACK_MESSAGE", 200151),
        ("SET_MESSAGE_REQUEST_MODE", 401),
        ("GET_SUBSCRIPTIONGROUP_CONFIG", 352),
        ("DELETE_ACL_CONFIG", 51),
        ("UNLOCK_BATCH_MQ", 42),
    ]:
        assert RequestCode[name] == number
    for name, number in [
        ("RPC_TIME_OUT", -1006),
        ("UPDATE_AND_CREATE_ACL_CONFIG_FAILED", 209),
        ("CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS", 2016),
        ("POLICY_NOT_EXIST", 3002),
    ]:
        assert ResponseCode[name] == number
    # 209 prints as its 5.x name; the 4.9 name is an alias
    assert ResponseCode(209).name == "POLLING_FULL"


def test_language_bytes():
    assert [(code.name, int(code)) for code in LanguageCode][:3] == [
        ("JAVA", 0),
        ("CPP", 1),
        ("DOTNET", 2),
    ]
    assert LanguageCode.NODE_JS == 13
