"""White-list address patterns (docs/spec/ACL.md §2.4): one case per form."""

from __future__ import annotations

import re

import pytest

from rocketmq_core.acl.addresses import AddressPattern, AddressPatternError, peer_ip


def matches(pattern: str, peer: str) -> bool:
    return AddressPattern.compile(pattern).matches(peer_ip(peer))


@pytest.mark.parametrize(
    ("pattern", "peer", "expected"),
    [
        ("", "10.0.0.1:5000", False),  # blank: never
        ("*", "10.0.0.1:5000", True),
        ("*.*.*.*", "10.0.0.1:5000", True),
        ("*:*:*:*:*:*:*:*", "[::1]:5000", True),
        ("192.168.1.{1,2,3}", "192.168.1.3:5000", True),
        ("192.168.1.{1,2,3}", "192.168.1.4:5000", False),
        ("10.0.0.1,10.0.0.2", "10.0.0.2:5000", True),
        ("10.0.0.1,10.0.0.2", "10.0.0.3:5000", False),
        ("10.10.103.*", "10.10.103.250:5000", True),
        ("10.10.103.*", "10.10.104.250:5000", False),
        ("192.168.*.*", "192.168.7.7:5000", True),
        ("192.168.*.*", "192.169.7.7:5000", False),
        ("192.168.1.1-100", "192.168.1.100:5000", True),
        ("192.168.1.1-100", "192.168.1.101:5000", False),
        ("192.168.1-2.9", "192.168.2.77:5000", True),  # octets after the range are ignored
        ("127.0.0.1", "127.0.0.1:5000", True),
        ("127.0.0.1", "127.0.0.2:5000", False),
        ("::1", "[0:0:0:0:0:0:0:1]:5000", True),  # IPv6 compared in full form
        ("1:2:3:4:5:6:7:*", "[1:2:3:4:5:6:7:ffff]:5000", True),
        ("1:2:3:4:5:6:7:*", "[1:2:3:4:5:6:8:1]:5000", False),
        ("2::ac5:78:1-200", "[2::ac5:78:1ff]:5000", True),
        ("2::ac5:78:1-200", "[2::ac5:78:201]:5000", False),
        ("2::ac5:78:1-200:*", "[2::ac5:78:150:9]:5000", True),
        ("1::{a,b}", "[1::b]:5000", True),
        ("10.0.0.*", "[::ffff:10.0.0.9]:5000", True),  # IPv4 client of a dual-stack socket
        ("10.0.0.*", "[::1]:5000", False),
    ],
)
def test_pattern(pattern, peer, expected):
    assert matches(pattern, peer) is expected


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("1.2.3", "is not an IPv4 or IPv6 address"),
        ("hello", "is not an IPv4 or IPv6 address"),
        ("10.0.0.1,nope", "'nope' is not an IPv4 or IPv6 address"),
        ("*.1.2.3", "octets 2-4 only"),
        ("1.2.3.300-400", "300 is out of range (0-255)"),
        ("1.2.3.9-1", "runs backwards"),
        ("1.2.{3,4}.5}", "must be its last part"),
        ("1.2.{3,4}", "must be the 4th octet"),
        ("1:*:3", "* may only be the last group"),
        ("1.2.3.{x,4}", "is not an IPv4 or IPv6 address"),
    ],
)
def test_bad_pattern_says_why(pattern, problem):
    with pytest.raises(AddressPatternError, match=re.escape(problem)):
        AddressPattern.compile(pattern)


def test_peer_ip_drops_the_port():
    assert str(peer_ip("10.1.2.3:51234")) == "10.1.2.3"
    assert str(peer_ip("[::1]:51234")) == "::1"
    assert peer_ip("unknown") is None
