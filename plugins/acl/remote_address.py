"""White-address patterns of ``plain_acl.yml`` (RocketMQ's RemoteAddressStrategy family) for IPv4 and IPv6.

The forms are listed on ``RemoteAddressPattern``; where they differ from RocketMQ 4 it says so.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})

_V4_SEGMENT = re.compile(r"[0-9]{1,3}")  # not \d: that accepts non-ASCII digits
_V6_SEGMENT = re.compile(r"[0-9a-fA-F]{1,4}")


class AddressPatternError(ValueError):
    """A white-address pattern that cannot be parsed; the message quotes the pattern and the bad part."""


@dataclass(frozen=True)
class AddressRange:
    """One alternative of a pattern: per segment an inclusive ``(low, high)`` range, for one address family."""

    version: int  # 4 or 6
    segments: tuple[tuple[int, int], ...]

    def matches(self, version: int, values: tuple[int, ...]) -> bool:
        return version == self.version and all(
            low <= value <= high for (low, high), value in zip(self.segments, values, strict=True)
        )


def _segment(text: str, version: int, pattern: str) -> tuple[int, int]:
    maximum, base, shape = (255, 10, _V4_SEGMENT) if version == 4 else (0xFFFF, 16, _V6_SEGMENT)
    if text == "*":
        return 0, maximum
    low_text, dash, high_text = text.partition("-")
    if not dash:
        high_text = low_text
    if not (shape.fullmatch(low_text) and shape.fullmatch(high_text)):
        raise AddressPatternError(f"white address {pattern!r}: segment {text!r} is not a number, a range a-b or *")
    low, high = int(low_text, base), int(high_text, base)
    if not low <= high <= maximum:
        limit = "255" if version == 4 else "ffff"
        raise AddressPatternError(f"white address {pattern!r}: segment {text!r} is not a range within 0-{limit}")
    return low, high


def _v6_groups(address: str, pattern: str) -> list[str]:
    """The eight groups of an IPv6 pattern, ``::`` expanded to zeros and a short ``...:*`` padded with ``*``."""
    if address.count("::") > 1:
        raise AddressPatternError(f"white address {pattern!r}: '::' may appear once")
    if "::" in address:
        left, _, right = address.partition("::")
        head = left.split(":") if left else []
        tail = right.split(":") if right else []
        missing = 8 - len(head) - len(tail)
        if missing < 1:
            raise AddressPatternError(f"white address {pattern!r}: an IPv6 address has eight groups")
        return [*head, *(["0"] * missing), *tail]
    groups = address.split(":")
    if len(groups) < 8 and groups[-1] == "*":
        groups += ["*"] * (8 - len(groups))
    return groups


def _parse_one(address: str, pattern: str) -> AddressRange:
    if ":" in address:
        if "*" not in address and "-" not in address:
            try:  # a plain address: let ipaddress handle compression and an IPv4 tail
                exact = ipaddress.IPv6Address(address)
            except ValueError:
                raise AddressPatternError(f"white address {pattern!r}: {address!r} is not an IPv6 address") from None
            return AddressRange(6, tuple((v, v) for v in _v6_values(exact)))
        groups = _v6_groups(address, pattern)
        if len(groups) != 8:
            raise AddressPatternError(f"white address {pattern!r}: an IPv6 address has eight groups")
        return AddressRange(6, tuple(_segment(g.strip(), 6, pattern) for g in groups))
    parts = address.split(".")
    if len(parts) < 4 and parts[-1] == "*":
        parts += ["*"] * (4 - len(parts))  # 192.168.* means 192.168.*.*
    if len(parts) != 4:
        raise AddressPatternError(f"white address {pattern!r}: {address!r} does not have four segments")
    return AddressRange(4, tuple(_segment(p.strip(), 4, pattern) for p in parts))


def _v6_values(address: ipaddress.IPv6Address) -> tuple[int, ...]:
    packed = address.packed
    return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))


def _list_items(text: str) -> list[str]:
    """The addresses of ``a,b,c``: a bare item (no ``.`` or ``:``) replaces the previous item's last segment."""
    items: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise AddressPatternError(f"white address {text!r}: the list has an empty item")
        if "." not in item and ":" not in item:
            if not items:
                raise AddressPatternError(f"white address {text!r}: the list must start with a full address")
            previous = items[-1]
            separator = ":" if ":" in previous else "."
            item = previous.rsplit(separator, 1)[0] + separator + item
        items.append(item)
    return items


def _choice_items(text: str) -> list[str]:
    """The addresses of RocketMQ's ``192.168.1.{1,2,3}`` form."""
    opening = text.rfind("{")
    prefix = text[:opening]
    if opening < 0 or not prefix.endswith((".", ":")):
        raise AddressPatternError(
            f"white address {text!r}: '{{...}}' must follow the leading segments, as a.b.c.{{x,y}}"
        )
    choices = [c.strip() for c in text[opening + 1 : -1].split(",")]
    if not all(choices):
        raise AddressPatternError(f"white address {text!r}: the choices have an empty item")
    return [prefix + c for c in choices]


def _caller(ip: str) -> tuple[int, tuple[int, ...]] | None:
    """An address as (version, segment values); None if it is not an IP address."""
    text = ip.strip().strip("[]").split("%", 1)[0]  # a zone id (fe80::1%eth0) does not matter for matching
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return 4, tuple(address.ipv4_mapped.packed)
        return 6, _v6_values(address)
    return 4, tuple(address.packed)


@dataclass(frozen=True)
class RemoteAddressPattern:
    """A parsed white-address pattern: ``matches(ip)`` tells whether a caller's IP is covered.

    - ``*``, ``*.*.*.*`` and ``*:*:*:*:*:*:*:*`` match every caller; a blank pattern matches none.
    - ``192.168.0.1`` / ``2001:db8::1``: that address (IPv6 compared after expansion).
    - ``192.168.1.1,192.168.1.9`` (RocketMQ's list) and ``192.168.1.1,2,3`` (a bare item repeats the previous
      item's leading segments with a new last one); ``192.168.1.{1,2,3}`` and ``1050::300c:{1,2}`` as in RocketMQ.
    - Any segment may be ``*`` or an inclusive range ``a-b`` (decimal for IPv4, hex for IPv6): ``192.168.*.1-100``.
      RocketMQ 4 honours only the first wildcard segment (its ``192.168.*.1-100`` ignores ``1-100``); here every
      segment is checked. ``192.168.*`` is read as ``192.168.*.*`` (RocketMQ rejects the short form).
    - An IPv4-mapped IPv6 caller (``::ffff:10.0.0.1``, as a dual-stack listener reports it) matches as IPv4.
    """

    source: str
    alternatives: tuple[AddressRange, ...] = ()
    match_all: bool = False

    @classmethod
    def parse(cls, pattern: str | None) -> RemoteAddressPattern:
        text = (pattern or "").strip()
        if not text:
            return cls("")
        if text in MATCH_ALL:
            return cls(text, match_all=True)
        if text.endswith("}"):
            items = _choice_items(text)
        elif "," in text:
            items = _list_items(text)
        else:
            items = [text]
        return cls(text, tuple(_parse_one(item, text) for item in items))

    def matches(self, ip: str) -> bool:
        if self.match_all:
            return True  # as RocketMQ's NullRemoteAddressStrategy: even an unparsable peer
        caller = _caller(ip)
        if caller is None:
            return False
        version, values = caller
        return any(alternative.matches(version, values) for alternative in self.alternatives)

    def __str__(self) -> str:
        return self.source
