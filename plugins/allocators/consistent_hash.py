"""A consistent-hash ring with virtual nodes (RocketMQ's ConsistentHashRouter), hashed with MD5.

MD5 rather than Python's ``hash()``: the ring must be identical in every process and on every broker.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence


def md5_hash(key: str) -> int:
    """The first four bytes of the key's MD5 as an unsigned int, as RocketMQ's default ``MD5Hash``."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4], "big")


class ConsistentHashRing:
    def __init__(self, nodes: Sequence[str], virtual_nodes: int) -> None:
        if virtual_nodes < 1:
            raise ValueError(f"virtualNodeCnt is {virtual_nodes}, it must be >= 1")
        points = sorted((md5_hash(f"{node}-{i}"), node) for node in nodes for i in range(virtual_nodes))
        self._hashes = [h for h, _ in points]
        self._nodes = [n for _, n in points]

    def route(self, key: str) -> str | None:
        """The first node clockwise from the key's hash (wrapping around)."""
        if not self._nodes:
            return None
        i = bisect.bisect_left(self._hashes, md5_hash(key))
        return self._nodes[i % len(self._nodes)]
