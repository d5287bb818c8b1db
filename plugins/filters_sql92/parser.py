"""Recursive-descent parser from selector tokens to a syntax tree, with RocketMQ's compile-time type checks.

Precedence, loosest first: OR, AND, NOT, ``=``/``<>``/``IS [NOT] NULL``, ``<``/``>``/BETWEEN/IN/CONTAINS..., unary sign.
"""

from __future__ import annotations

import math
from enum import Enum, auto

from orbitmq.errors import MQError
from plugins.filters_sql92.lexer import Token, TokenKind, filter_error, tokenize
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
    Or,
    Property,
    deepest_beyond,
)

# Parentheses, NOT, signs and chained comparisons deeper than this are refused: the parser and the compiled
# closures recurse once per level, and no real subscription nests this deep.
MAX_DEPTH = 50

# Java long: RocketMQ parses integer constants with Long.valueOf, so wider ones are errors there too.
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

_ORDERING = {
    TokenKind.GT: CompareOp.GT,
    TokenKind.GE: CompareOp.GE,
    TokenKind.LT: CompareOp.LT,
    TokenKind.LE: CompareOp.LE,
}
_MATCHES = {
    TokenKind.CONTAINS: MatchOp.CONTAINS,
    TokenKind.STARTSWITH: MatchOp.STARTSWITH,
    TokenKind.ENDSWITH: MatchOp.ENDSWITH,
}
# What may follow NOT inside a comparison (``a NOT IN (...)``); any other NOT there belongs to no rule.
_NEGATABLE = frozenset({TokenKind.BETWEEN, TokenKind.IN, *_MATCHES})


class _Kind(Enum):
    """The static type of an operand, known at compile time (a property's is only known per message)."""

    NULL = auto()
    BOOL = auto()
    NUMBER = auto()
    STRING = auto()
    PROPERTY = auto()


def _kind(node: Node) -> _Kind:
    if isinstance(node, Literal):
        v = node.value
        if v is None:
            return _Kind.NULL
        if isinstance(v, bool):
            return _Kind.BOOL
        if isinstance(v, str):
            return _Kind.STRING
        return _Kind.NUMBER
    if isinstance(node, Property):
        return _Kind.PROPERTY
    return _Kind.BOOL


def parse(expression: str) -> Node:
    """The syntax tree of ``expression``; raises ``MQError(ILLEGAL_FILTER_EXPRESSION)`` naming the position."""
    return _Parser(expression, tokenize(expression)).parse()


class _Parser:
    def __init__(self, expression: str, tokens: list[Token]) -> None:
        self.expression = expression
        self.tokens = tokens
        self.index = 0
        self.tok = tokens[0]
        self.prev_end = 0  # end offset of the last consumed token: with a start offset it quotes an operand
        self.depth = 0  # current nesting of parentheses, NOT and signs

    # ------------------------------------------------------------------ token helpers
    def advance(self) -> Token:
        tok = self.tok
        self.prev_end = tok.pos + len(tok.text)
        if tok.kind is not TokenKind.EOF:
            self.index += 1
            self.tok = self.tokens[self.index]
        return tok

    def peek_kind(self) -> TokenKind:
        """The kind of the token after the current one (the grammar needs two tokens to see ``NOT IN``)."""
        nxt = min(self.index + 1, len(self.tokens) - 1)
        return self.tokens[nxt].kind

    def expect(self, kind: TokenKind, what: str) -> Token:
        if self.tok.kind is not kind:
            raise self.error(f"unexpected {self.tok.describe()}, expected {what}", self.tok.pos)
        return self.advance()

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep", pos)

    def error(self, detail: str, pos: int) -> MQError:
        return filter_error(self.expression, detail, pos)

    def quote(self, start: int, end: int) -> str:
        """The source text of an operand as an error message shows it: string literals already carry quotes."""
        text = self.expression[start:end]
        if len(text) >= 2 and text[0] == text[-1] == "'" and "'" not in text[1:-1].replace("''", ""):
            return text
        return f"'{text}'"

    # ------------------------------------------------------------------ grammar
    def parse(self) -> Node:
        if self.tok.kind is TokenKind.EOF:
            raise self.error("the expression is empty", 0)
        start = self.tok.pos
        node = self.or_expr()
        if self.tok.kind is not TokenKind.EOF:
            raise self.error(f"unexpected {self.tok.describe()}", self.tok.pos)
        self.check_condition(node, start, self.prev_end)
        too_deep = deepest_beyond(node, MAX_DEPTH)
        if too_deep is not None:  # chained comparisons (a = b = c = ...) nest without parentheses
            raise self.error(f"nested more than {MAX_DEPTH} levels deep", too_deep)
        return node

    def or_expr(self) -> Node:
        start = self.tok.pos
        first = self.and_expr()
        if self.tok.kind is not TokenKind.OR:
            return first
        self.check_condition(first, start, self.prev_end)
        operands = [first]
        while self.tok.kind is TokenKind.OR:
            self.advance()
            operand_start = self.tok.pos
            operands.append(self.and_expr())
            self.check_condition(operands[-1], operand_start, self.prev_end)
        return Or(tuple(operands), start)

    def and_expr(self) -> Node:
        start = self.tok.pos
        first = self.not_expr()
        if self.tok.kind is not TokenKind.AND:
            return first
        self.check_condition(first, start, self.prev_end)
        operands = [first]
        while self.tok.kind is TokenKind.AND:
            self.advance()
            operand_start = self.tok.pos
            operands.append(self.not_expr())
            self.check_condition(operands[-1], operand_start, self.prev_end)
        return And(tuple(operands), start)

    def not_expr(self) -> Node:
        # Standard SQL places NOT above the comparisons (NOT a = 1 is NOT (a = 1)); RocketMQ's grammar binds it to
        # the next primary instead, which makes ``NOT a = 1`` mean ``(NOT a) = 1`` -- a condition nobody means.
        if self.tok.kind is not TokenKind.NOT:
            return self.equality()
        pos = self.advance().pos
        self.enter(pos)
        start = self.tok.pos
        operand = self.not_expr()
        self.check_condition(operand, start, self.prev_end)
        self.depth -= 1
        return Not(operand, pos)

    def equality(self) -> Node:
        start = self.tok.pos
        left = self.comparison()
        left_end = self.prev_end
        while True:
            kind = self.tok.kind
            if kind is TokenKind.EQ or kind is TokenKind.NE:
                op_pos = self.advance().pos
                right_start = self.tok.pos
                right = self.comparison()
                self.check_equality(left, (start, left_end), right, (right_start, self.prev_end), op_pos)
                left = Compare(CompareOp.EQ if kind is TokenKind.EQ else CompareOp.NE, left, right, start)
            elif kind is TokenKind.IS:
                self.advance()
                negated = self.tok.kind is TokenKind.NOT
                if negated:
                    self.advance()
                self.expect(TokenKind.NULL, "NULL")
                left = IsNull(left, negated, start)
            else:
                return left
            left_end = self.prev_end

    def comparison(self) -> Node:
        start = self.tok.pos
        left = self.unary()
        left_end = self.prev_end
        while True:
            kind = self.tok.kind
            negated = kind is TokenKind.NOT and self.peek_kind() in _NEGATABLE
            if negated:
                self.advance()
                kind = self.tok.kind
            op_tok = self.tok
            if kind in _ORDERING:
                op = _ORDERING[kind]
                self.advance()
                self.check_ordered(left, start, left_end, op.value)
                right_start = self.tok.pos
                right = self.unary()
                self.check_ordered(right, right_start, self.prev_end, op.value)
                left = Compare(op, left, right, start)
            elif kind in _MATCHES:
                self.advance()
                if not isinstance(left, Property | Literal) or _kind(left) not in (_Kind.PROPERTY, _Kind.STRING):
                    raise self.error(
                        f"{op_tok.text.upper()} needs a property or a string on its left, got "
                        f"{self.quote(start, left_end)}",
                        start,
                    )
                pattern = self.expect(TokenKind.STRING, "a string literal")
                assert isinstance(pattern.value, str)
                left = Match(_MATCHES[kind], left, pattern.value, negated, start)
            elif kind is TokenKind.BETWEEN:
                left = self.between(left, start, left_end, negated)
            elif kind is TokenKind.IN:
                left = self.in_list(left, start, left_end, negated)
            else:
                return left
            left_end = self.prev_end

    def between(self, value: Node, start: int, value_end: int, negated: bool) -> Node:
        self.advance()  # BETWEEN
        self.check_ordered(value, start, value_end, "BETWEEN")
        low_start = self.tok.pos
        low = self.unary()
        low_end = self.prev_end
        self.check_ordered(low, low_start, low_end, "BETWEEN")
        self.expect(TokenKind.AND, "AND")
        high_start = self.tok.pos
        high = self.unary()
        high_end = self.prev_end
        self.check_ordered(high, high_start, high_end, "BETWEEN")
        # RocketMQ refuses constant bounds in the wrong order for BETWEEN (the range would be empty), not for
        # NOT BETWEEN.
        if (
            not negated
            and isinstance(low, Literal)
            and isinstance(high, Literal)
            and isinstance(low.value, int | float)
            and isinstance(high.value, int | float)
            and low.value > high.value
        ):
            raise self.error(
                f"BETWEEN bounds are reversed: {self.quote(low_start, low_end)} is greater than "
                f"{self.quote(high_start, high_end)}",
                low_start,
            )
        return Between(value, low, high, negated, start)

    def in_list(self, left: Node, start: int, left_end: int, negated: bool) -> Node:
        self.advance()  # IN
        if not isinstance(left, Property):
            raise self.error(f"IN needs a property on its left, got {self.quote(start, left_end)}", start)
        self.expect(TokenKind.LPAREN, "'('")
        values: list[str] = []
        while True:
            tok = self.expect(TokenKind.STRING, "a string literal (IN lists hold strings)")
            assert isinstance(tok.value, str)
            values.append(tok.value)
            if self.tok.kind is not TokenKind.COMMA:
                break
            self.advance()
        self.expect(TokenKind.RPAREN, "',' or ')'")
        return InList(left, frozenset(values), negated, start)

    def unary(self, outermost: bool = True) -> Node:
        tok = self.tok
        if tok.kind is TokenKind.PLUS or tok.kind is TokenKind.MINUS:
            self.advance()
            self.enter(tok.pos)
            operand_start = self.tok.pos
            operand = self.unary(outermost=False)
            self.depth -= 1
            if tok.kind is TokenKind.PLUS and isinstance(operand, Property):
                node: Node = operand  # RocketMQ lets +a stand for a
            elif isinstance(operand, Literal) and _kind(operand) is _Kind.NUMBER:
                assert isinstance(operand.value, int | float)
                value = operand.value if tok.kind is TokenKind.PLUS else -operand.value
                node = Literal(value, tok.pos)
            else:
                # A property is a string, so RocketMQ's negation of one is always NULL: refuse it here instead.
                raise self.error(
                    f"only a number can follow a sign, got {self.quote(operand_start, self.prev_end)}", tok.pos
                )
        else:
            node = self.primary()
        if (
            outermost
            and isinstance(node, Literal)
            and type(node.value) is int
            and not (LONG_MIN <= node.value <= LONG_MAX)
        ):
            raise self.error(f"integer {self.quote(tok.pos, self.prev_end)} is out of the 64-bit range", tok.pos)
        return node

    def primary(self) -> Node:
        tok = self.tok
        kind = tok.kind
        if kind is TokenKind.IDENT:
            self.advance()
            assert isinstance(tok.value, str)
            return Property(tok.value, tok.pos)
        if kind is TokenKind.STRING or kind is TokenKind.INTEGER:
            self.advance()
            return Literal(tok.value, tok.pos)
        if kind is TokenKind.DECIMAL:
            self.advance()
            assert isinstance(tok.value, float)
            if math.isinf(tok.value):
                raise self.error(f"number {tok.text!r} is out of range", tok.pos)
            return Literal(tok.value, tok.pos)
        if kind is TokenKind.TRUE or kind is TokenKind.FALSE:
            self.advance()
            return Literal(kind is TokenKind.TRUE, tok.pos)
        if kind is TokenKind.NULL:
            self.advance()
            return Literal(None, tok.pos)
        if kind is TokenKind.LPAREN:
            self.advance()
            self.enter(tok.pos)
            node = self.or_expr()
            self.expect(TokenKind.RPAREN, "')'")
            self.depth -= 1
            return node
        raise self.error(f"unexpected {tok.describe()}", tok.pos)

    # ------------------------------------------------------------------ type checks (RocketMQ's, at compile time)
    def check_condition(self, node: Node, start: int, end: int) -> None:
        """AND/OR/NOT operands and the whole expression must be conditions; a bare property counts (``prop = TRUE``)."""
        if _kind(node) in (_Kind.NUMBER, _Kind.STRING):
            raise self.error(
                f"{self.quote(start, end)} is not a condition (expected a comparison, a property, TRUE or FALSE)",
                start,
            )

    def check_ordered(self, node: Node, start: int, end: int, op: str) -> None:
        """Only numbers (and properties, converted per message) can be ordered: RocketMQ's checkLessThanOperand."""
        if _kind(node) not in (_Kind.NUMBER, _Kind.PROPERTY):
            raise self.error(
                f"{self.quote(start, end)} cannot be compared with {op!r}: only numbers and properties can", start
            )

    def check_equality(
        self, left: Node, left_span: tuple[int, int], right: Node, right_span: tuple[int, int], op_pos: int
    ) -> None:
        """NULL is tested with IS NULL, and a boolean only equals a boolean or a property (RocketMQ's rules)."""
        kinds = (_kind(left), _kind(right))
        for kind, span in ((kinds[0], left_span), (kinds[1], right_span)):
            if kind is _Kind.NULL:
                raise self.error("NULL cannot be compared with '=' or '<>', use IS NULL or IS NOT NULL", span[0])
        if _Kind.BOOL in kinds and (_Kind.NUMBER in kinds or _Kind.STRING in kinds):
            raise self.error(
                f"{self.quote(*left_span)} and {self.quote(*right_span)} cannot be compared: "
                "a boolean only equals a boolean or a property",
                op_pos,
            )
