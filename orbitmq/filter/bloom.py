"""The Bloom filter of the filter pre-check (SQL92 groups): each consumer group owns k bits of a per-message bitmap.

At dispatch a filter plugin sets the bits of every group whose filter matched; a pull skips a message when any of
its group's bits is clear. Geometry and bit order follow RocketMQ's BloomFilter/BitsArray; the hash does not.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

Bits = bytes | bytearray | memoryview


def set_positions(bits: bytearray, positions: tuple[int, ...]) -> None:
    """Set bit positions in a bitmap: bit ``p`` is bit ``p % 8`` (least significant first) of byte ``p // 8``.

    Unchecked, for dispatch: the positions come from a ``BloomFilterData`` of the bitmap's filter."""
    for p in positions:
        bits[p >> 3] |= 1 << (p & 7)


@dataclass(frozen=True, slots=True)
class BloomFilterData:
    """A key's bit positions and the bit count ``m`` of the filter that computed them."""

    positions: tuple[int, ...]
    bit_num: int

    def __post_init__(self) -> None:
        # Checked once here so the per-message is_hit can index without bounds checks of its own.
        if any(not 0 <= p < self.bit_num for p in self.positions):
            raise ValueError(f"bit positions {self.positions} do not all fit in {self.bit_num} bits")


@dataclass(frozen=True)
class BloomFilter:
    """``f``% false positives for ``n`` keys set in one bitmap (RocketMQ's ``BloomFilter.createByFn(f, n)``).

    k = ceil(log_0.5(f / 100)) hash functions; m = ceil(n * log2(100 / f) * log2(e)) bits, rounded up to whole
    bytes. Bit ``p`` is bit ``p % 8`` (least significant first) of byte ``p // 8``, as in RocketMQ's BitsArray.
    """

    error_rate_percent: int = 20
    expected: int = 32
    m: int = field(init=False)
    k: int = field(init=False)

    def __post_init__(self) -> None:
        f, n = self.error_rate_percent, self.expected
        # bool is an int in Python; True as an error rate is a mistake, not 1%.
        if isinstance(f, bool) or not isinstance(f, int) or not 1 <= f <= 99:
            raise ValueError(f"Bloom filter error rate must be an integer percentage from 1 to 99, got {f!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"Bloom filter expected key count must be a positive integer, got {n!r}")
        rate = f / 100.0
        # The optimum for a fill of one half: each hash halves the false-positive rate.
        k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(n * (math.log(1 / rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "m", 8 * math.ceil(m / 8))

    @classmethod
    def create(cls, error_rate_percent: int = 20, expected: int = 32) -> BloomFilter:
        return cls(error_rate_percent, expected)

    @property
    def byte_length(self) -> int:
        """Size of the bitmap this filter reads and writes."""
        return (self.m + 7) // 8

    def generate(self, key: str) -> BloomFilterData:
        """The key's k bit positions: the same in every process and Python run (no ``hash()``).

        Double hashing (Kirsch and Mitzenmacher, as RocketMQ does with murmur3): position i is h1 + i * h2 mod m.
        h2 is forced odd, so with m a multiple of 8 and k at most 7 the k positions are always distinct.
        """
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        m = self.m
        return BloomFilterData(tuple((h1 + i * h2) % m for i in range(1, self.k + 1)), m)

    def hash_to(self, key: str, bits: bytearray) -> None:
        """Set ``key``'s bits in ``bits`` (``byte_length`` bytes)."""
        self.hash_to_data(self.generate(key), bits)

    def hash_to_data(self, data: BloomFilterData, bits: bytearray) -> None:
        """Set the bits of positions computed earlier by this filter (or one of the same geometry)."""
        self._check(data, bits)
        set_positions(bits, data.positions)

    def is_hit(self, data: BloomFilterData, bits: Bits) -> bool:
        """True when all of the key's bits are set: "maybe matched". False means certainly not set for this key."""
        self._check(data, bits)
        # A plain loop: runs per pulled message, and all() over a generator costs a frame per call.
        for p in data.positions:  # noqa: SIM110
            if not bits[p >> 3] & (1 << (p & 7)):
                return False
        return True

    def _check(self, data: BloomFilterData, bits: Bits) -> None:
        # Positions from another geometry, or a bitmap of another size, would silently give wrong answers.
        if data.bit_num != self.m or len(data.positions) != self.k:
            raise ValueError(
                f"Bloom filter data (k={len(data.positions)}, m={data.bit_num}) does not belong to this filter "
                f"(k={self.k}, m={self.m})"
            )
        if len(bits) != self.byte_length:
            raise ValueError(f"bitmap is {len(bits)} bytes, this Bloom filter uses {self.byte_length}")
