"""The syntax tree of a parsed SQL92 selector: what the parser builds and the evaluator compiles.

Every node keeps the 0-based offset it starts at so type errors found after parsing can still point at the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# A constant's value: None is SQL NULL; bool before int matters to anyone dispatching on type (bool is an int).
Value = None | bool | int | float | str


class CompareOp(Enum):
    EQ = "="
    NE = "<>"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="

    @property
    def is_ordering(self) -> bool:
        return self not in (CompareOp.EQ, CompareOp.NE)

    def flipped(self) -> CompareOp:
        """The operator with its operands swapped: ``5 < a`` is ``a > 5``."""
        return _FLIPPED[self]


_FLIPPED = {
    CompareOp.EQ: CompareOp.EQ,
    CompareOp.NE: CompareOp.NE,
    CompareOp.GT: CompareOp.LT,
    CompareOp.GE: CompareOp.LE,
    CompareOp.LT: CompareOp.GT,
    CompareOp.LE: CompareOp.GE,
}


class MatchOp(Enum):
    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value
    pos: int


@dataclass(frozen=True, slots=True)
class Property:
    name: str
    pos: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Operand
    right: Operand
    pos: int


@dataclass(frozen=True, slots=True)
class Between:
    value: Operand
    low: Operand
    high: Operand
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class InList:
    prop: Property
    values: frozenset[str]
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class Match:
    """``CONTAINS`` / ``STARTSWITH`` / ``ENDSWITH`` and their ``NOT`` forms; the pattern is always a string literal."""

    op: MatchOp
    subject: Property | Literal
    pattern: str
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Operand
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    pos: int


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Node, ...]  # flattened: a AND b AND c is one node, evaluated left to right
    pos: int


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Node, ...]
    pos: int


# Boolean-valued nodes; a bare Property in boolean position is also allowed (it means ``prop = TRUE``).
Predicate = Compare | Between | InList | Match | IsNull | Not | And | Or
Node = Predicate | Literal | Property
# Anything that can stand on either side of a comparison (``(a > 1) = TRUE`` compares a predicate's value).
Operand = Node


def _children(n: Node) -> tuple[Node, ...]:
    if isinstance(n, Compare):
        return (n.left, n.right)
    if isinstance(n, Between):
        return (n.value, n.low, n.high)
    if isinstance(n, InList):
        return (n.prop,)
    if isinstance(n, Match):
        return (n.subject,)
    if isinstance(n, IsNull | Not):
        return (n.operand,)
    if isinstance(n, And | Or):
        return n.operands
    return ()


def deepest_beyond(node: Node, limit: int) -> int | None:
    """The position of a node more than ``limit`` levels down, or None if the tree is shallower."""
    stack: list[tuple[Node, int]] = [(node, 1)]
    while stack:
        n, level = stack.pop()
        if level > limit:
            return n.pos
        stack += ((child, level + 1) for child in _children(n))
    return None


def referenced_properties(node: Node) -> frozenset[str]:
    """Every property name the tree reads."""
    names: set[str] = set()
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Property):
            names.add(n.name)
        else:
            stack += _children(n)
    return frozenset(names)
