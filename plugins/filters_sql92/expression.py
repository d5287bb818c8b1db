"""The compiled SQL92 selector a subscription holds: compile once, then evaluate per message.

``compile_sql92`` is the entry point; ``Sql92Expression.evaluate`` never raises and matches only on TRUE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from plugins.filters_sql92.evaluator import Predicate, compile_predicate
from plugins.filters_sql92.lexer import filter_error
from plugins.filters_sql92.nodes import referenced_properties
from plugins.filters_sql92.parser import parse

# Longer expressions are refused before parsing: they cost compile time and per-message evaluation time, and a
# subscription travels in every heartbeat.
MAX_EXPRESSION_LENGTH = 4096


@dataclass(frozen=True, slots=True)
class Sql92Expression:
    """A compiled selector. Equal (and hashing equal) when the source text is equal."""

    expression: str
    referenced_properties: frozenset[str] = field(compare=False)
    _predicate: Predicate = field(compare=False, repr=False)

    def evaluate(self, properties: Mapping[str, str]) -> bool:
        """True only when the selector is TRUE for these properties; FALSE and UNKNOWN (missing or unparsable
        values) are both no match."""
        try:
            return self._predicate(properties) is True
        except Exception:  # the contract is "never raises": a non-str property value from a sloppy caller
            return False


def compile_sql92(expression: str) -> Sql92Expression:
    """Compile ``expression``; raises ``MQError(ILLEGAL_FILTER_EXPRESSION)`` naming the position of the problem."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise filter_error(
            expression,
            f"the expression is {len(expression)} characters long, the limit is {MAX_EXPRESSION_LENGTH}",
        )
    tree = parse(expression)
    return Sql92Expression(expression, referenced_properties(tree), compile_predicate(tree))
