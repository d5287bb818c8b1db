"""Tag filtering (``*`` or ``TagA || TagB``) as RocketMQ does it: tag hash on the ConsumeQueue, exact tag after.

Used by PullMessage and by the pop service; SQL92 filters come later through the plugin layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2

from broker.store.message import MessageExt, tags_hash_code
from common.errors import Code, MQError

SUB_ALL = "*"


@dataclass(frozen=True)
class TagFilter:
    """Matches every message (``*``) or those whose tag is one of ``tags``."""

    tags: frozenset[str]
    codes: frozenset[int]

    @classmethod
    def parse(cls, expression: str) -> TagFilter:
        expr = (expression or "").strip()
        if not expr or expr == SUB_ALL:
            return cls(frozenset(), frozenset())
        tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
        if not tags:
            raise MQError(Code.ILLEGAL_FILTER_EXPRESSION, f"tag expression {expression!r} names no tag")
        return cls(tags, frozenset(tags_hash_code(t) for t in tags))

    @property
    def matches_all(self) -> bool:
        return not self.tags

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: bytes | None) -> bool:
        return self.matches_all or tags_code in self.codes

    def is_matched_by_commitlog(self, msg: MessageExt) -> bool:
        # The hash may collide: confirm with the tag itself.
        return self.matches_all or msg.tags in self.tags


def filter_from_v2(expression: definition_pb2.FilterExpression | None) -> TagFilter | None:
    """None for "everything"; ILLEGAL_FILTER_EXPRESSION for SQL92 until the plugin lands or a bad tag list."""
    if expression is None or expression.type == definition_pb2.FilterType.FILTER_TYPE_UNSPECIFIED:
        return None
    if expression.type == definition_pb2.FilterType.SQL:
        raise MQError(Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 filter expressions are not supported by this broker yet")
    tag_filter = TagFilter.parse(expression.expression)
    return None if tag_filter.matches_all else tag_filter
