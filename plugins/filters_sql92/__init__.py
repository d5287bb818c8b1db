"""The SQL92 property filter (RocketMQ's message selector).

The broker integration lives in ``plugin.py`` (over the hook layer only); the Bloom filter of its dispatch-time
pre-check is shared with the broker (``orbitmq.filter.bloom``). The rest of this package has no broker dependency.
"""

from plugins.filters_sql92.expression import MAX_EXPRESSION_LENGTH, Sql92Expression, compile_sql92
from plugins.filters_sql92.parser import MAX_DEPTH

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "Sql92Expression",
    "compile_sql92",
]
