"""Subscription expressions: tags (``*``, ``TagA || TagB``) or SQL92 over message properties (``a > 5``).

One ``MessageSelector`` feeds both consume paths: v2 ``FilterExpression`` and PullBatch's (type, expression).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from rocketmq.grpc_protocol import definition_pb2

from oms.errors import OMSMessageFormatException
from orbitmq.errors import Code

SUB_ALL = "*"
MAX_EXPRESSION_LENGTH = 4096


class ExpressionType(StrEnum):
    TAG = "TAG"
    SQL92 = "SQL92"


@dataclass(frozen=True)
class MessageSelector:
    """RocketMQ's ``MessageSelector``: ``by_tag("A || B")`` or ``by_sql("color = 'red' AND n > 3")``."""

    type: ExpressionType
    expression: str
    tags: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def by_tag(cls, expression: str | None = SUB_ALL) -> MessageSelector:
        expr = (expression or SUB_ALL).strip() or SUB_ALL
        if len(expr) > MAX_EXPRESSION_LENGTH:
            raise OMSMessageFormatException(
                Code.ILLEGAL_FILTER_EXPRESSION,
                f"tag expression is {len(expr)} characters, the limit is {MAX_EXPRESSION_LENGTH}",
            )
        if expr == SUB_ALL:
            return cls(ExpressionType.TAG, SUB_ALL)
        tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
        if not tags or SUB_ALL in tags:
            raise OMSMessageFormatException(
                Code.ILLEGAL_FILTER_EXPRESSION, f"tag expression {expression!r} must be '*' or 'TagA || TagB'"
            )
        return cls(ExpressionType.TAG, " || ".join(sorted(tags)), tags)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        expr = (expression or "").strip()
        if not expr:
            raise OMSMessageFormatException(Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 expression is blank")
        if len(expr) > MAX_EXPRESSION_LENGTH:
            raise OMSMessageFormatException(
                Code.ILLEGAL_FILTER_EXPRESSION,
                f"SQL92 expression is {len(expr)} characters, the limit is {MAX_EXPRESSION_LENGTH}",
            )
        return cls(ExpressionType.SQL92, expr)

    @classmethod
    def of(cls, expression: str | MessageSelector | None, expression_type: str | None = None) -> MessageSelector:
        """A selector from what ``attach_queue`` got: a selector, a tag expression, or SQL with its type."""
        if isinstance(expression, MessageSelector):
            return expression
        kind = (expression_type or ExpressionType.TAG.value).strip().upper()
        if kind in ("SQL", "SQL92"):
            return cls.by_sql(expression or "")
        if kind != ExpressionType.TAG:
            raise OMSMessageFormatException(
                Code.ILLEGAL_FILTER_EXPRESSION, f"expression type {expression_type!r} is not TAG or SQL92"
            )
        return cls.by_tag(expression)

    @property
    def matches_all(self) -> bool:
        return self.type is ExpressionType.TAG and self.expression == SUB_ALL

    def to_pb(self) -> definition_pb2.FilterExpression:
        kind = definition_pb2.FilterType.SQL if self.type is ExpressionType.SQL92 else definition_pb2.FilterType.TAG
        return definition_pb2.FilterExpression(type=kind, expression=self.expression)

    def pull_filter(self) -> tuple[str, str]:
        """PullBatch's ``filter_type``/``filter_expression`` (empty type = everything)."""
        if self.matches_all:
            return "", ""
        return self.type.value, self.expression

    def accepts_tag(self, tag: str | None) -> bool:
        """Client-side recheck of a tag subscription (the broker filtered by it already; SQL is the broker's)."""
        if self.type is not ExpressionType.TAG or not self.tags:
            return True
        return tag in self.tags

    def __str__(self) -> str:
        return f"{self.type.value}:{self.expression}"
