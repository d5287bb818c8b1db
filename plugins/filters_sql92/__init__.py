"""The SQL92 property filter (RocketMQ's message selector) and the Bloom filter of its dispatch-time pre-check.

The broker integration lives in ``plugin.py``; this package itself has no broker dependency.
"""

from plugins.filters_sql92.bloom import BloomFilter, BloomFilterData
from plugins.filters_sql92.expression import MAX_EXPRESSION_LENGTH, Sql92Expression, compile_sql92
from plugins.filters_sql92.parser import MAX_DEPTH

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "BloomFilter",
    "BloomFilterData",
    "Sql92Expression",
    "compile_sql92",
]
