"""Compiles a selector's syntax tree into closures over a message's properties, applying RocketMQ's type rules.

Each closure returns True, False or None (SQL UNKNOWN); the filter matches only on True.

Type rules (RocketMQ's ComparisonExpression / UnaryExpression, with the divergences marked *):

- Property values are strings; a missing property is NULL. Any comparison with NULL is UNKNOWN, and UNKNOWN
  propagates through NOT/AND/OR by SQL three-valued logic (FALSE AND UNKNOWN is FALSE, TRUE OR UNKNOWN is TRUE).
- Against an integer constant (``5``, ``-3``, ``10L``) the value must parse as a Java long: optional sign and ASCII
  digits only, so ``'5.5'`` or ``' 5'`` vs ``5`` is UNKNOWN (write ``5.0`` to compare decimals).
  Against a decimal constant (``3.14``, ``1E3``) it parses as a Java double: surrounding whitespace and an
  ``f``/``d`` suffix are allowed (* NaN, Infinity and hex floats are not numbers here). A failed parse is UNKNOWN
  (* RocketMQ throws, which fails the whole expression; here only that comparison is UNKNOWN).
  (* RocketMQ parses with Java int when the constant fits an int, so 3000000000 > 5 fails there; here it is true.)
- ``>``, ``>=``, ``<``, ``<=``, BETWEEN take numbers and properties only (strings, booleans and NULL are compile
  errors); two properties are both parsed as doubles. ``x BETWEEN a AND b`` is ``x >= a AND x <= b`` (inclusive),
  NOT BETWEEN is ``x < a OR x > b``; constant bounds in reverse order are a compile error (for BETWEEN).
- ``=``/``<>``: property vs string constant (or property vs property) is exact, case-sensitive string equality;
  vs a number, the number rules above; vs TRUE/FALSE, Java ``Boolean.valueOf``: ``'true'`` in any case is TRUE and
  every other string is FALSE (so ``flag = FALSE`` matches ``'no'``). ``<>`` is ``NOT (=)``. ``= NULL`` is a compile
  error (use IS NULL), as is comparing TRUE/FALSE/a condition with a number or a string.
- ``IS NULL`` is true exactly when the property is absent; it is never UNKNOWN.
- ``IN``/``NOT IN`` need a property on the left and string constants in the list; exact string membership.
- ``CONTAINS``/``STARTSWITH``/``ENDSWITH`` (and NOT forms) take a string constant; an empty one never matches,
  not even in the NOT forms (RocketMQ's rule). * A missing property is UNKNOWN (RocketMQ: FALSE, which only
  differs under an outer NOT).
- * A bare property as a condition (``flag``, ``NOT flag``) means ``flag = TRUE``; RocketMQ treats any string
  there as FALSE, so such filters never matched.
- * NOT binds looser than comparisons (``NOT a = 1`` is ``NOT (a = 1)``, as in standard SQL; RocketMQ's grammar
  reads ``(NOT a) = 1``). * A sign only applies to numbers: ``-a`` is a compile error (RocketMQ: always NULL).
  * RocketMQ's ``a = b`` is TRUE when both are missing; here it is UNKNOWN.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from plugins.filters_sql92.nodes import (
    And,
    Between,
    Compare,
    CompareOp,
    InList,
    IsNull,
    Literal,
    Match,
    MatchOp,
    Node,
    Not,
    Property,
    Value,
)

Properties = Mapping[str, str]
Predicate = Callable[[Properties], bool | None]
ValueFn = Callable[[Properties], Value]

_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1

_OPS: dict[CompareOp, Callable[[Any, Any], bool]] = {
    CompareOp.EQ: operator.eq,
    CompareOp.NE: operator.ne,
    CompareOp.GT: operator.gt,
    CompareOp.GE: operator.ge,
    CompareOp.LT: operator.lt,
    CompareOp.LE: operator.le,
}

# Java Double.valueOf without NaN/Infinity/hex: trimmed of control characters and spaces, optional f/d suffix.
_DOUBLE_RE = re.compile(r"[\x00-\x20]*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?[\x00-\x20]*", re.ASCII)


# ---------------------------------------------------------------------- conversions (never raise)
def to_long(text: str) -> int | None:
    """Java ``Long.valueOf``: an optional sign and ASCII digits within 64 bits, else None."""
    body = text[1:] if text and text[0] in "+-" else text
    if not (body.isascii() and body.isdigit()):  # isdigit alone accepts '²' and other Unicode digits
        return None
    try:
        value = int(text)
    except ValueError:  # only Python's limit on very long digit strings
        return None
    return value if _LONG_MIN <= value <= _LONG_MAX else None


def to_double(text: str) -> float | None:
    """Java ``Double.valueOf`` for decimal text, else None."""
    m = _DOUBLE_RE.fullmatch(text)
    return float(m.group(1)) if m is not None else None


def to_bool(text: str) -> bool:
    """Java ``Boolean.valueOf``: only 'true', in any case, is true."""
    return text.lower() == "true"


def _convert(text: str, like: Value) -> Value:
    """``text`` converted to the type of ``like`` (a property compared with a constant), None if it does not parse."""
    if type(like) is bool:
        return to_bool(text)
    if type(like) is int:
        return to_long(text)
    if type(like) is float:
        return to_double(text)
    return text


def compare_values(op: CompareOp, left: Value, right: Value) -> bool | None:
    """The general comparison, for operands whose types are only known per message."""
    if left is None or right is None:
        return None
    lt, rt = type(left), type(right)
    if lt is str and rt is str:
        if op.is_ordering:  # two strings can only be ordered as numbers
            left, right = to_double(left), to_double(right)  # type: ignore[arg-type]
    elif lt is str:
        left = _convert(left, right)  # type: ignore[arg-type]
    elif rt is str:
        right = _convert(right, left)  # type: ignore[arg-type]
    elif (lt is bool) != (rt is bool):  # refused at compile time; kept so no message can raise here
        return None
    if left is None or right is None:
        return None
    return _OPS[op](left, right)


# ---------------------------------------------------------------------- compilation
def compile_predicate(node: Node) -> Predicate:
    """The closure deciding ``node`` for one message's properties: True, False or None (UNKNOWN)."""
    if isinstance(node, Literal):
        return _constant(node.value if isinstance(node.value, bool) else None)
    if isinstance(node, Property):
        return _property_is_true(node.name)
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, Between):
        return _between(node)
    if isinstance(node, InList):
        return _in_list(node)
    if isinstance(node, Match):
        return _match(node)
    if isinstance(node, IsNull):
        return _is_null(node)
    if isinstance(node, Not):
        return _not(compile_predicate(node.operand))
    if isinstance(node, And):
        return _and([compile_predicate(n) for n in node.operands])
    return _or([compile_predicate(n) for n in node.operands])


def compile_value(node: Node) -> ValueFn:
    """The closure producing ``node``'s value: a property's string, a constant, or a condition's truth value."""
    if isinstance(node, Literal):
        value = node.value
        return lambda _props: value
    if isinstance(node, Property):
        name = node.name
        return lambda props: props.get(name)
    return compile_predicate(node)


def _constant(value: bool | None) -> Predicate:
    return lambda _props: value


def _property_is_true(name: str) -> Predicate:
    def predicate(props: Properties) -> bool | None:
        v = props.get(name)
        return None if v is None else v.lower() == "true"

    return predicate


def _compare(node: Compare) -> Predicate:
    # The common shapes (property vs constant, either way round) get a closure with the conversion chosen once.
    if isinstance(node.left, Property) and isinstance(node.right, Literal):
        return _property_vs_constant(node.left.name, node.op, node.right.value)
    if isinstance(node.left, Literal) and isinstance(node.right, Property):
        return _property_vs_constant(node.right.name, node.op.flipped(), node.left.value)
    op = node.op
    left, right = compile_value(node.left), compile_value(node.right)
    return lambda props: compare_values(op, left(props), right(props))


def _property_vs_constant(name: str, op: CompareOp, constant: Value) -> Predicate:
    cmp = _OPS[op]
    if constant is None:  # refused at compile time (= NULL); kept total
        return _constant(None)
    if type(constant) is bool:

        def vs_bool(props: Properties) -> bool | None:
            v = props.get(name)
            return None if v is None else cmp(v.lower() == "true", constant)

        return vs_bool
    if type(constant) is str:

        def vs_string(props: Properties) -> bool | None:
            v = props.get(name)
            return None if v is None else cmp(v, constant)

        return vs_string
    convert = to_long if type(constant) is int else to_double

    def vs_number(props: Properties) -> bool | None:
        v = props.get(name)
        if v is None:
            return None
        n = convert(v)
        return None if n is None else cmp(n, constant)

    return vs_number


def _between(node: Between) -> Predicate:
    value, low, high = node.value, node.low, node.high
    if (
        isinstance(value, Property)
        and isinstance(low, Literal)
        and isinstance(high, Literal)
        and type(low.value) is type(high.value)
        and type(low.value) in (int, float)
    ):
        # One conversion for both bounds; mixed int/float bounds take the general path, as each bound converts
        # the property its own way.
        name, lo, hi = value.name, low.value, high.value
        convert = to_long if type(lo) is int else to_double
        negated = node.negated

        def between(props: Properties) -> bool | None:
            v = props.get(name)
            if v is None:
                return None
            n = convert(v)
            if n is None:
                return None
            return (not lo <= n <= hi) if negated else lo <= n <= hi  # type: ignore[operator]

        return between
    if node.negated:
        return _or(
            [
                _compare(Compare(CompareOp.LT, value, low, node.pos)),
                _compare(Compare(CompareOp.GT, value, high, node.pos)),
            ]
        )
    return _and(
        [
            _compare(Compare(CompareOp.GE, value, low, node.pos)),
            _compare(Compare(CompareOp.LE, value, high, node.pos)),
        ]
    )


def _in_list(node: InList) -> Predicate:
    name, values = node.prop.name, node.values
    if node.negated:

        def not_in(props: Properties) -> bool | None:
            v = props.get(name)
            return None if v is None else v not in values

        return not_in

    def in_(props: Properties) -> bool | None:
        v = props.get(name)
        return None if v is None else v in values

    return in_


_MATCHERS: dict[MatchOp, Callable[[str, str], bool]] = {
    MatchOp.CONTAINS: operator.contains,
    MatchOp.STARTSWITH: str.startswith,
    MatchOp.ENDSWITH: str.endswith,
}


def _match(node: Match) -> Predicate:
    pattern, negated, matcher = node.pattern, node.negated, _MATCHERS[node.op]
    if not pattern:
        return _constant(False)
    subject = compile_value(node.subject)

    def match(props: Properties) -> bool | None:
        v = subject(props)
        if type(v) is not str:
            return None
        return matcher(v, pattern) is not negated

    return match


def _is_null(node: IsNull) -> Predicate:
    operand, negated = compile_value(node.operand), node.negated
    if isinstance(node.operand, Property):
        name = node.operand.name
        if negated:
            return lambda props: props.get(name) is not None
        return lambda props: props.get(name) is None
    return lambda props: (operand(props) is None) is not negated


def _not(operand: Predicate) -> Predicate:
    def not_(props: Properties) -> bool | None:
        r = operand(props)
        return None if r is None else not r

    return not_


def _and(operands: list[Predicate]) -> Predicate:
    if len(operands) == 2:  # the usual shape, unrolled
        first, second = operands

        def and2(props: Properties) -> bool | None:
            a = first(props)
            if a is False:
                return False
            b = second(props)
            if b is False:
                return False
            return None if a is None or b is None else True

        return and2

    def and_(props: Properties) -> bool | None:
        unknown = False
        for operand in operands:
            r = operand(props)
            if r is False:
                return False
            if r is None:
                unknown = True
        return None if unknown else True

    return and_


def _or(operands: list[Predicate]) -> Predicate:
    if len(operands) == 2:
        first, second = operands

        def or2(props: Properties) -> bool | None:
            a = first(props)
            if a is True:
                return True
            b = second(props)
            if b is True:
                return True
            return None if a is None or b is None else False

        return or2

    def or_(props: Properties) -> bool | None:
        unknown = False
        for operand in operands:
            r = operand(props)
            if r is True:
                return True
            if r is None:
                unknown = True
        return None if unknown else False

    return or_
