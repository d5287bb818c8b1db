"""A consistent-hash ring with virtual nodes, RocketMQ's ConsistentHashRouter with its default MD5Hash.
MD5 rather than Python's ``hash()`` (salted per process): the ring must be identical on every broker."""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Iterable


def md5_hash(key: str) -> int:
    """The first four bytes of the key's UTF-8 MD5 digest as an unsigned big-endian int (RocketMQ's MD5Hash)."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4], "big")


class ConsistentHashRing:
    """Physical nodes, each placed ``virtual_nodes`` times on a 32-bit ring at ``md5_hash(f"{node}-{i}")``."""

    def __init__(self, nodes: Iterable[str], virtual_nodes: int) -> None:
        if virtual_nodes < 1:
            # RocketMQ accepts 0, but then nothing routes anywhere and every queue is left unconsumed.
            raise ValueError(f"virtual_nodes is {virtual_nodes}, it must be >= 1")
        # A dict keyed by hash, later insertions overwriting earlier ones: the same collision rule as RocketMQ's
        # TreeMap.put, so two nodes whose virtual nodes collide resolve the same way in every process.
        ring: dict[int, str] = {}
        for node in nodes:
            for i in range(virtual_nodes):
                ring[md5_hash(f"{node}-{i}")] = node
        self._hashes = sorted(ring)
        self._nodes = [ring[h] for h in self._hashes]

    def route(self, key: str) -> str | None:
        """The node of the first virtual node at or after the key's hash, wrapping around; None on an empty ring."""
        if not self._nodes:
            return None
        i = bisect.bisect_left(self._hashes, md5_hash(key))
        return self._nodes[i % len(self._nodes)]


@functools.lru_cache(maxsize=128)
def cached_ring(nodes: tuple[str, ...], virtual_nodes: int) -> ConsistentHashRing:
    """The ring for a (sorted) member list: every client of a group asks with the same members in turn."""
    return ConsistentHashRing(nodes, virtual_nodes)
