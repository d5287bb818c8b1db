"""Tag filtering (``*`` or ``TagA || TagB``) as RocketMQ does it: tag hash on the ConsumeQueue, exact tag after.

``TagFilter`` is the built-in TAG filter plugin's compiled form; v2 ``FilterExpression``s map to types here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2

from broker.hookspecs import FilterBitmap, FilterType, StoredMessage
from broker.store.message import tags_hash_code
from orbitmq.errors import Code, MQError

SUB_ALL = "*"
MAX_TAG_EXPRESSION_LENGTH = 4096


@dataclass(frozen=True)
class TagFilter:
    """Matches every message (``*``) or those whose tag is one of ``tags``."""

    tags: frozenset[str]
    codes: frozenset[int]
    expression: str = SUB_ALL
    expression_type: str = FilterType.TAG.value
    uses_cq_ext: bool = False

    @classmethod
    def parse(cls, expression: str) -> TagFilter:
        expr = (expression or "").strip()
        if len(expr) > MAX_TAG_EXPRESSION_LENGTH:
            raise MQError(
                Code.ILLEGAL_FILTER_EXPRESSION,
                f"tag expression is {len(expr)} characters, the limit is {MAX_TAG_EXPRESSION_LENGTH}",
            )
        if not expr or expr == SUB_ALL:
            return cls(frozenset(), frozenset())
        tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
        if not tags:
            raise MQError(Code.ILLEGAL_FILTER_EXPRESSION, f"tag expression {expression!r} names no tag")
        return cls(tags, frozenset(tags_hash_code(t) for t in tags), expr)

    @property
    def matches_all(self) -> bool:
        return not self.tags

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: FilterBitmap | None) -> bool:
        return self.matches_all or tags_code in self.codes

    def is_matched_by_commitlog(self, msg: StoredMessage) -> bool:
        # The hash may collide: confirm with the tag itself.
        return self.matches_all or msg.tags in self.tags


def v2_expression(expression: definition_pb2.FilterExpression | None) -> tuple[str, str] | None:
    """(expression type, expression) of a v2 filter; None for "everything"."""
    if expression is None or expression.type == definition_pb2.FilterType.FILTER_TYPE_UNSPECIFIED:
        return None
    if expression.type == definition_pb2.FilterType.SQL:
        return FilterType.SQL92.value, expression.expression
    return FilterType.TAG.value, expression.expression
