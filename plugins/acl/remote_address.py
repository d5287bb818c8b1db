"""Remote address patterns of ``plain_acl.yml``: ``*``, exact IPs, ``192.168.1.1,2,3`` lists and per-segment
wildcards and ranges such as ``192.168.*.1-100`` (RocketMQ's RemoteAddressStrategy family)."""

from __future__ import annotations

from dataclasses import dataclass


class AddressPatternError(ValueError):
    """A white-address pattern that cannot be parsed."""


def _segment(text: str, pattern: str) -> tuple[int, int] | None:
    """A segment as an inclusive range; None for ``*``."""
    if text == "*":
        return None
    lo, dash, hi = text.partition("-")
    try:
        low, high = (int(lo), int(hi)) if dash else (int(text), int(text))
    except ValueError:
        raise AddressPatternError(f"white address {pattern!r}: segment {text!r} is not a number, a-b or *") from None
    if not 0 <= low <= high <= 255:
        raise AddressPatternError(f"white address {pattern!r}: segment {text!r} is outside 0-255")
    return low, high


@dataclass(frozen=True)
class RemoteAddressPattern:
    """Matches IPv4 addresses segment by segment; an empty pattern matches nothing, ``*`` everything."""

    source: str
    alternatives: tuple[tuple[tuple[int, int] | None, ...], ...]
    match_all: bool = False

    @classmethod
    def parse(cls, pattern: str | None) -> RemoteAddressPattern:
        text = (pattern or "").strip()
        if not text:
            return cls("", ())
        if text in ("*", "*.*.*.*"):
            return cls(text, (), match_all=True)
        if "," in text:  # 192.168.1.1,2,3: the last segment varies
            head, _, tail = text.rpartition(".")
            if not head or head.count(".") != 2:
                raise AddressPatternError(f"white address {text!r}: a list needs three fixed segments first")
            prefix = head.split(".")
            return cls(text, tuple(cls._parse_one(".".join([*prefix, last.strip()]), text) for last in tail.split(",")))
        return cls(text, (cls._parse_one(text, text),))

    @staticmethod
    def _parse_one(address: str, pattern: str) -> tuple[tuple[int, int] | None, ...]:
        parts = address.split(".")
        if len(parts) > 4 or (len(parts) < 4 and parts[-1] != "*"):
            raise AddressPatternError(f"white address {pattern!r}: an IPv4 address has four segments")
        parts += ["*"] * (4 - len(parts))  # 192.168.* means 192.168.*.*
        return tuple(_segment(p.strip(), pattern) for p in parts)

    def matches(self, ip: str) -> bool:
        if self.match_all:
            return True
        parts = ip.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            return False
        values = [int(p) for p in parts]
        return any(
            all(seg is None or seg[0] <= v <= seg[1] for seg, v in zip(alt, values, strict=True))
            for alt in self.alternatives
        )
