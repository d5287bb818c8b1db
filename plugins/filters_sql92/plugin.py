"""The SQL92 filter as a broker plugin: compiles SQL92 subscriptions and sets their Bloom bits at dispatch.

Registered by the broker as ``sql92-filter`` (only when ``enablePropertyFilter``), through the same hooks as any plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.hookspecs import FilterBitmap, FilterRegistration, FilterType, HookMessage, StoredMessage, hookimpl
from orbitmq.filter.bloom import set_positions
from plugins.filters_sql92 import Sql92Expression, compile_sql92


@dataclass(frozen=True)
class Sql92Filter:
    """A compiled SQL92 subscription evaluated on the message's properties (user and system, e.g. ``TAGS``)."""

    compiled: Sql92Expression
    expression_type: str = FilterType.SQL92.value
    uses_cq_ext: bool = False

    @property
    def expression(self) -> str:
        return self.compiled.expression

    @property
    def matches_all(self) -> bool:
        return False

    def evaluate(self, properties: Mapping[str, str]) -> bool:
        return self.compiled.evaluate(properties)

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: FilterBitmap | None) -> bool:
        return True  # the Bloom pre-check is the broker's wrapper; without it only the message can tell

    def is_matched_by_commitlog(self, msg: StoredMessage) -> bool:
        return self.compiled.evaluate(msg.properties)


class Sql92FilterPlugin:
    @hookimpl
    def orbitmq_compile_filter(self, expression_type: str, expression: str) -> Sql92Filter | None:
        if expression_type.upper() not in (FilterType.SQL92.value, "SQL"):
            return None
        return Sql92Filter(compile_sql92(expression))

    @hookimpl
    def orbitmq_filter_bits(
        self, message: HookMessage, registrations: Sequence[FilterRegistration], bits: bytearray
    ) -> None:
        properties = message.properties
        for reg in registrations:
            f = reg.filter
            if isinstance(f, Sql92Filter) and f.evaluate(properties):
                set_positions(bits, reg.bloom_positions)
