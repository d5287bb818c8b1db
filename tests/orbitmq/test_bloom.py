"""The shared Bloom filter (``orbitmq.filter.bloom``) of the SQL92 pre-check: RocketMQ's geometry, no false
negatives, the configured false-positive rate, argument checks, and positions that are the same in every process
(they index bitmaps kept on disk)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.filter.bloom import BloomFilter, BloomFilterData

REPO = Path(__file__).resolve().parents[2]


def rocketmq_geometry(f: int, n: int) -> tuple[int, int]:
    """RocketMQ's BloomFilter constructor, written out independently: (m, k)."""
    rate = f / 100
    k = math.ceil(math.log(rate) / math.log(0.5))
    m = math.ceil(n * math.log2(1 / rate) * math.log2(math.e))
    return 8 * math.ceil(m / 8), k


def test_default_geometry() -> None:
    bf = BloomFilter.create()
    assert (bf.error_rate_percent, bf.expected) == (20, 32)
    assert (bf.m, bf.k, bf.byte_length) == (112, 3, 14)
    bf10 = BloomFilter.create(10, 128)
    assert (bf10.m, bf10.k, bf10.byte_length) == (616, 4, 77)
    assert BloomFilter.create(1, 1).k == 7
    assert BloomFilter.create(99, 1).k == 1
    assert BloomFilter.create(20, 32) == BloomFilter(20, 32)


@pytest.mark.parametrize("f", [1, 2, 5, 10, 20, 33, 50, 75, 99])
@pytest.mark.parametrize("n", [1, 7, 32, 100, 1000])
def test_geometry_matches_rocketmq(f: int, n: int) -> None:
    bf = BloomFilter.create(f, n)
    m, k = rocketmq_geometry(f, n)
    assert (bf.m, bf.k) == (m, k)
    assert bf.m % 8 == 0 and bf.byte_length == bf.m // 8


@pytest.mark.parametrize(
    ("f", "n", "message"),
    [
        (0, 32, "error rate must be an integer percentage from 1 to 99, got 0"),
        (100, 32, "got 100"),
        (-5, 32, "got -5"),
        (20.5, 32, "got 20.5"),
        (True, 32, "got True"),
        ("20", 32, "got '20'"),
        (20, 0, "expected key count must be a positive integer, got 0"),
        (20, -1, "got -1"),
        (20, 3.0, "got 3.0"),
        (20, False, "got False"),
    ],
)
def test_arguments_are_validated(f: object, n: object, message: str) -> None:
    with pytest.raises(ValueError, match="Bloom filter") as info:
        BloomFilter.create(f, n)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_generate() -> None:
    bf = BloomFilter.create(10, 128)
    data = bf.generate("CID_EXAMPLE#TopicTest")
    assert isinstance(data, BloomFilterData)
    assert data.bit_num == bf.m
    assert len(data.positions) == bf.k
    assert len(set(data.positions)) == bf.k  # odd stride, m a multiple of 8, k <= 7: never a repeat
    assert all(0 <= p < bf.m for p in data.positions)
    assert bf.generate("CID_EXAMPLE#TopicTest") == data
    assert bf.generate("CID_EXAMPLE#TopicTes") != data


def test_pinned_positions() -> None:
    # Bitmaps written at dispatch stay in the ConsumeQueue extension across restarts and upgrades: a change of hash
    # would make old bits answer "certainly not" for matching messages. Change these only with a migration.
    assert BloomFilter.create(20, 32).generate("G1#T").positions == (21, 68, 3)
    assert BloomFilter.create(20, 32).generate("组#主题").positions == (84, 25, 78)
    assert BloomFilter.create(10, 128).generate("CID_EXAMPLE#TopicTest").positions == (519, 468, 417, 366)


def test_bit_order_is_rocketmq_bitsarray() -> None:
    bf = BloomFilter.create(20, 32)
    bits = bytearray(bf.byte_length)
    bf.hash_to_data(BloomFilterData((0, 9, 111), bf.m), bits)
    assert bits[0] == 0x01 and bits[1] == 0x02 and bits[13] == 0x80
    assert sum(bin(b).count("1") for b in bits) == 3


def test_hash_to_and_is_hit() -> None:
    bf = BloomFilter.create()
    bits = bytearray(bf.byte_length)
    data = bf.generate("G1#T")
    assert not bf.is_hit(data, bits)
    bf.hash_to("G1#T", bits)
    assert bf.is_hit(data, bits)
    assert bf.is_hit(data, bytes(bits))
    assert bf.is_hit(data, memoryview(bits))
    one_missing = bytearray(bits)
    p = data.positions[1]
    one_missing[p >> 3] &= ~(1 << (p & 7)) & 0xFF
    assert not bf.is_hit(data, one_missing)
    assert bf.is_hit(data, b"\xff" * bf.byte_length)
    again = bytearray(bf.byte_length)
    bf.hash_to_data(data, again)
    assert again == bits


def test_misuse_is_refused() -> None:
    bf = BloomFilter.create(20, 32)
    other = BloomFilter.create(10, 32)
    data = bf.generate("G1#T")
    with pytest.raises(ValueError, match="bitmap is 13 bytes, this Bloom filter uses 14"):
        bf.is_hit(data, bytes(13))
    with pytest.raises(ValueError, match="bitmap is 15 bytes"):
        bf.hash_to("G1#T", bytearray(15))
    with pytest.raises(ValueError, match=r"does not belong to this filter \(k=4, m=160\)"):
        other.is_hit(data, bytes(other.byte_length))
    with pytest.raises(ValueError, match="does not belong"):
        bf.hash_to_data(BloomFilterData((1, 2), bf.m), bytearray(bf.byte_length))
    with pytest.raises(ValueError, match="do not all fit in 112 bits"):
        BloomFilterData((1, 2, 112), 112)
    with pytest.raises(ValueError, match="do not all fit"):
        BloomFilterData((-1, 2, 3), 112)


@settings(max_examples=150, deadline=None)
@given(
    keys=st.sets(st.text(max_size=20), min_size=1, max_size=80),
    f=st.integers(min_value=1, max_value=99),
    n=st.integers(min_value=1, max_value=200),
)
def test_no_false_negatives(keys: set[str], f: int, n: int) -> None:
    bf = BloomFilter.create(f, n)
    bits = bytearray(bf.byte_length)
    for key in keys:
        bf.hash_to(key, bits)
    assert all(bf.is_hit(bf.generate(key), bits) for key in keys)


@pytest.mark.parametrize(("f", "n"), [(20, 32), (10, 64), (5, 100), (30, 16)])
def test_false_positive_rate_is_near_the_configured_rate(f: int, n: int) -> None:
    bf = BloomFilter.create(f, n)
    trials, probes, hits = 20, 1000, 0
    for t in range(trials):
        bits = bytearray(bf.byte_length)
        for i in range(n):
            bf.hash_to(f"group-{t}-{i}#Topic", bits)
        hits += sum(bf.is_hit(bf.generate(f"other-{t}-{j}#Topic"), bits) for j in range(probes))
    rate = hits / (trials * probes)
    # at most about f: RocketMQ rounds k and m up, which mostly lowers the rate (30% for 16 keys gives 24%)
    theory = (1 - math.exp(-bf.k * n / bf.m)) ** bf.k
    assert 0.75 * f / 100 <= theory <= 1.05 * f / 100
    assert 0.75 * theory <= rate <= 1.25 * theory, (rate, theory)
    assert rate <= 1.25 * f / 100


def test_positions_are_the_same_in_another_process() -> None:
    keys = ["G1#T", "CID_EXAMPLE#TopicTest", "组#主题", "", "%RETRY%g#t"]
    script = (
        "import json, sys\n"
        "from orbitmq.filter.bloom import BloomFilter\n"
        "bf = BloomFilter.create(10, 128)\n"
        "print(json.dumps([bf.generate(k).positions for k in json.loads(sys.argv[1])]))\n"
    )
    here = [list(BloomFilter.create(10, 128).generate(k).positions) for k in keys]
    for seed in ("0", "12345"):  # hash() would differ between these; the Bloom positions must not
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(keys)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
            env=env,
            timeout=60,
        ).stdout
        assert json.loads(out) == here
