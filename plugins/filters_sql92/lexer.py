"""Tokenizer for RocketMQ's SQL92 message selector, and the error every stage of the compiler raises.

Token rules follow RocketMQ's ``SelectorParser.jj``: case-insensitive keywords, ``'...'`` strings with ``''``
as an escaped quote, ``--`` and ``/* */`` comments, names of ASCII letters, digits, ``_`` and ``$`` not starting
with a digit; beyond RocketMQ, a name may also contain ``.`` (``order.type``) and a ``--`` comment may end the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from orbitmq.errors import Code, MQError

# Long expressions are echoed shortened in error messages: the position already says where to look.
_ECHO_LIMIT = 120


class TokenKind(Enum):
    IDENT = "identifier"
    STRING = "string"
    INTEGER = "integer"
    DECIMAL = "decimal"
    # keywords (the value is the keyword itself, matched case-insensitively)
    NOT = "NOT"
    AND = "AND"
    OR = "OR"
    BETWEEN = "BETWEEN"
    IN = "IN"
    IS = "IS"
    NULL = "NULL"
    TRUE = "TRUE"
    FALSE = "FALSE"
    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"
    # operators and punctuation
    EQ = "="
    NE = "<>"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    LPAREN = "("
    RPAREN = ")"
    COMMA = ","
    PLUS = "+"
    MINUS = "-"
    EOF = "end of expression"


KEYWORDS: dict[str, TokenKind] = {
    k.value: k
    for k in (
        TokenKind.NOT,
        TokenKind.AND,
        TokenKind.OR,
        TokenKind.BETWEEN,
        TokenKind.IN,
        TokenKind.IS,
        TokenKind.NULL,
        TokenKind.TRUE,
        TokenKind.FALSE,
        TokenKind.CONTAINS,
        TokenKind.STARTSWITH,
        TokenKind.ENDSWITH,
    )
}

_OPERATORS: dict[str, TokenKind] = {
    k.value: k
    for k in (
        TokenKind.EQ,
        TokenKind.NE,
        TokenKind.GT,
        TokenKind.GE,
        TokenKind.LT,
        TokenKind.LE,
        TokenKind.LPAREN,
        TokenKind.RPAREN,
        TokenKind.COMMA,
        TokenKind.PLUS,
        TokenKind.MINUS,
    )
}


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str  # the source text, as written
    pos: int  # 0-based character offset in the expression
    value: str | int | float | None = None  # decoded literal (string without quotes, number) or identifier

    def describe(self) -> str:
        """How an error message names this token."""
        return "end of expression" if self.kind is TokenKind.EOF else repr(self.text)


# One alternation tried at each position; order matters where prefixes overlap (decimal before integer).
# re.ASCII keeps \d to 0-9: RocketMQ's grammar only knows ASCII digits and letters.
_TOKEN_RE = re.compile(
    r"""
      (?P<ws>[ \t\n\r\f]+)
    | (?P<comment>--[^\n\r]*|/\*.*?\*/)
    | (?P<decimal>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
    | (?P<integer>(?:0|[1-9]\d*)[lL]?)
    | (?P<string>'(?:[^']|'')*')
    | (?P<ident>[A-Za-z_$][A-Za-z0-9_$.]*)
    | (?P<op><>|>=|<=|[=<>(),+\-])
    """,
    re.VERBOSE | re.DOTALL | re.ASCII,
)


def filter_error(expression: str, detail: str, position: int | None = None) -> MQError:
    """The one error type of the compiler: ILLEGAL_FILTER_EXPRESSION, echoing the expression and the position."""
    echo = expression if len(expression) <= _ECHO_LIMIT else expression[:_ECHO_LIMIT] + "..."
    where = "" if position is None else f" at position {position}"
    return MQError(Code.ILLEGAL_FILTER_EXPRESSION, f"SQL92 expression {echo!r}: {detail}{where}")


def tokenize(expression: str) -> list[Token]:
    """All tokens of ``expression`` then an EOF token; raises ``MQError`` on a character no token starts with."""
    tokens: list[Token] = []
    pos = 0
    end = len(expression)
    while pos < end:
        m = _TOKEN_RE.match(expression, pos)
        if m is None:
            raise _lex_error(expression, pos)
        kind_name = m.lastgroup
        text = m.group()
        if kind_name == "ident":
            keyword = KEYWORDS.get(text.upper())
            if keyword is not None:
                tokens.append(Token(keyword, text, pos))
            else:
                tokens.append(Token(TokenKind.IDENT, text, pos, text))
        elif kind_name == "string":
            tokens.append(Token(TokenKind.STRING, text, pos, text[1:-1].replace("''", "'")))
        elif kind_name == "integer":
            # 10L is RocketMQ's (Java's) long suffix; Python ints have no width, so it only has to be accepted.
            tokens.append(Token(TokenKind.INTEGER, text, pos, int(text.rstrip("lL"))))
        elif kind_name == "decimal":
            tokens.append(Token(TokenKind.DECIMAL, text, pos, float(text)))
        elif kind_name == "op":
            tokens.append(Token(_OPERATORS[text], text, pos))
        # whitespace and comments produce nothing
        pos = m.end()
    tokens.append(Token(TokenKind.EOF, "", end))
    return tokens


def _lex_error(expression: str, pos: int) -> MQError:
    if expression[pos] == "'":
        return filter_error(expression, "unterminated string literal", pos)
    if expression.startswith("/*", pos):
        return filter_error(expression, "unterminated comment", pos)
    return filter_error(expression, f"unexpected character {expression[pos]!r}", pos)
