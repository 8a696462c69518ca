"""White-list address patterns of plain_acl.yml (docs/spec/ACL.md §2.4).

A pattern is compiled once, when the rules load; matching a peer is then a set lookup
or a few integer compares. ``peer_ip`` turns a connection's ``host:port`` into the
address the patterns are matched against (once per connection).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigError

MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})
IPV4_OCTETS = 4
IPV6_GROUPS = 8


class AddressPatternError(ConfigError, ValueError):
    """A white-list pattern that cannot be read; the message says why."""


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def peer_ip(peer_address: str) -> IPAddress | None:
    """``10.0.0.1:51234`` -> 10.0.0.1; ``[::1]:51234`` -> ::1 (everything from the last
    ``:`` dropped, as the Java broker does); None for a peer that is no IP address. An
    IPv4 client of a dual-stack socket counts as its IPv4 address, as Java shows it."""
    host = peer_address.rsplit(":", 1)[0] if ":" in peer_address else peer_address
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    parsed = _parse_ip(host)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


@dataclass(frozen=True)
class AddressPattern:
    """One compiled pattern: ``matches(ip)`` says whether a peer address is in it."""

    text: str
    matches: Callable[[IPAddress | None], bool]

    @classmethod
    def compile(cls, text: str | None) -> AddressPattern:
        """Read a pattern; AddressPatternError when it is not one of the §2.4 forms."""
        pattern = (text or "").strip()
        return cls(pattern, _matcher(pattern))


def _matcher(pattern: str) -> Callable[[IPAddress | None], bool]:
    if not pattern:
        return never
    if pattern in MATCH_ALL:
        return _always
    if pattern.endswith("}"):
        return _in_set(_brace_addresses(pattern))
    if "," in pattern:
        return _in_set([part.strip() for part in pattern.split(",") if part.strip()])
    if "*" in pattern or "-" in pattern:
        return _ipv6_range(pattern) if ":" in pattern else _ipv4_range(pattern)
    return _in_set([pattern])


def never(_ip: IPAddress | None) -> bool:
    """The matcher of an empty pattern: no address is in it."""
    return False


def _always(_ip: IPAddress | None) -> bool:
    return True


def _parse_ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _in_set(addresses: list[str]) -> Callable[[IPAddress | None], bool]:
    """Exact addresses; IPv6 compared in full form, so ``::1`` equals ``0:0:...:1``."""
    allowed = set()
    for address in addresses:
        parsed = _parse_ip(address)
        if parsed is None:
            raise AddressPatternError(f"{address!r} is not an IPv4 or IPv6 address")
        allowed.add(parsed)

    def matches(ip: IPAddress | None) -> bool:
        return ip in allowed

    return matches


def _brace_addresses(pattern: str) -> list[str]:
    """``192.168.1.{1,2,3}`` -> the three addresses; the braces must be the last part."""
    prefix, _brace, inside = pattern.partition("{")
    separator = ":" if ":" in pattern else "."
    if "}" in inside[:-1] or (prefix and not prefix.endswith(separator)):
        raise AddressPatternError(f"{pattern!r}: the {{a,b,...}} list must be its last part")
    if separator == "." and prefix.count(".") != IPV4_OCTETS - 1:
        raise AddressPatternError(f"{pattern!r}: the {{a,b,...}} list must be the 4th octet")
    return [prefix + item.strip() for item in inside[:-1].split(",") if item.strip()]


def _ipv4_range(pattern: str) -> Callable[[IPAddress | None], bool]:
    """``10.10.*.*``, ``192.168.1.1-100``: the first of octets 2-4 that is ``*`` or
    ``n-m`` is the range; the octets before it must match, those after are ignored."""
    octets = [octet.strip() for octet in pattern.split(".")]
    if len(octets) != IPV4_OCTETS:
        raise AddressPatternError(f"{pattern!r} does not have 4 octets")
    for index in range(1, IPV4_OCTETS):
        bounds = _range_bounds(octets[index], 255, 10, pattern)
        if bounds is not None:
            break
    else:
        raise AddressPatternError(f"{pattern!r}: a range (* or n-m) may be in octets 2-4 only")
    prefix = tuple(_number(octet, 255, 10, pattern) for octet in octets[:index])
    low, high = bounds

    def matches(ip: IPAddress | None) -> bool:
        if not isinstance(ip, ipaddress.IPv4Address):
            return False
        packed = ip.packed
        return tuple(packed[:index]) == prefix and low <= packed[index] <= high

    return matches


def _ipv6_range(pattern: str) -> Callable[[IPAddress | None], bool]:
    """``1:2:3:*``, ``2::ac5:78:1-200`` or ``2::ac5:78:1-200:*``: ``*`` only at the end;
    the range group follows the prefix (``::`` in the prefix fills the address up)."""
    if "*" in pattern[:-1]:
        raise AddressPatternError(f"{pattern!r}: in IPv6, * may only be the last group")
    groups = pattern.split(":")
    range_groups = 2 if pattern.endswith("*") and "-" in groups[-2] else 1
    head = ":".join(groups[:-range_groups])
    bounds = _range_bounds(groups[-range_groups].strip(), 0xFFFF, 16, pattern)
    if bounds is None or "-" in head:
        raise AddressPatternError(f"{pattern!r}: in IPv6, n-m may only be the last group")
    prefix = _ipv6_prefix(head, IPV6_GROUPS - range_groups, pattern)
    index = len(prefix)
    low, high = bounds

    def matches(ip: IPAddress | None) -> bool:
        if not isinstance(ip, ipaddress.IPv6Address):
            return False
        packed = ip.packed
        words = tuple(packed[i] << 8 | packed[i + 1] for i in range(0, 2 * (index + 1), 2))
        return words[:index] == prefix and low <= words[index] <= high

    return matches


def _ipv6_prefix(head: str, width: int, pattern: str) -> tuple[int, ...]:
    """The groups before the range; a ``::`` stands for as many zero groups as fill
    ``width``."""
    if "::" in head:
        left, _sep, right = head.partition("::")
        before = [group for group in left.split(":") if group]
        after = [group for group in right.split(":") if group]
        missing = width - len(before) - len(after)
        if missing < 1:
            raise AddressPatternError(f"{pattern!r} has too many groups")
        texts = before + ["0"] * missing + after
    else:
        texts = [group for group in head.split(":") if group] if head else []
    if len(texts) >= IPV6_GROUPS:
        raise AddressPatternError(f"{pattern!r} has too many groups")
    return tuple(_number(text, 0xFFFF, 16, pattern) for text in texts)


def _range_bounds(part: str, maximum: int, base: int, pattern: str) -> tuple[int, int] | None:
    """``*`` -> (0, maximum); ``n-m`` -> (n, m); anything else -> None."""
    if part == "*":
        return 0, maximum
    if "-" not in part:
        return None
    low_text, _dash, high_text = part.partition("-")
    low = _number(low_text, maximum, base, pattern)
    high = _number(high_text, maximum, base, pattern)
    if low > high:
        raise AddressPatternError(f"{pattern!r}: the range {part} runs backwards")
    return low, high


def _number(text: str, maximum: int, base: int, pattern: str) -> int:
    try:
        value = int(text.strip(), base)
    except ValueError:
        raise AddressPatternError(f"{pattern!r}: {text.strip()!r} is not a number") from None
    if not 0 <= value <= maximum:
        raise AddressPatternError(f"{pattern!r}: {value} is out of range (0-{maximum})")
    return value
