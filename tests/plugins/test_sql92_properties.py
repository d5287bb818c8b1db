"""Property tests of the SQL92 selector: random trees against a Python oracle, NOT as negation, no exceptions.

Trees are rendered with the fewest parentheses precedence allows, so the oracle also checks NOT > AND > OR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.errors import Code, MQError
from plugins.filters_sql92 import Sql92Expression, compile_sql92

Props = dict[str, str]

# The schema of generated messages: every property present with a value of its type.
INT_PROPS = ("a", "b")
FLOAT_PROPS = ("x",)
STR_PROPS = ("s", "t")
BOOL_PROPS = ("f",)
ALL_PROPS = INT_PROPS + FLOAT_PROPS + STR_PROPS + BOOL_PROPS

PRECEDENCE_OR, PRECEDENCE_AND, PRECEDENCE_NOT, PRECEDENCE_ATOM = 1, 2, 3, 4

ORDERINGS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    "=": lambda x, y: x == y,
    "<>": lambda x, y: x != y,
}
FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "<>": "<>"}


@dataclass(frozen=True)
class Tree:
    """A generated condition: how to write it, its precedence, and the oracle deciding it for a message."""

    render: Callable[[Callable[[], bool]], str]  # given "add redundant parentheses?", the SQL text
    precedence: int
    oracle: Callable[[Props], bool]


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def atom(sql: str, oracle: Callable[[Props], bool]) -> Tree:
    return Tree(lambda _paren: sql, PRECEDENCE_ATOM, oracle)


def int_text(value: int) -> str:
    return str(value)  # a negative constant is written with the unary minus, as a user would


def float_text(value: float) -> str:
    text = repr(value)
    return text if any(c in text for c in ".eE") else text + ".0"


ints = st.integers(min_value=-1000, max_value=1000)
floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
strings = st.text(alphabet="ab' x", max_size=4)


@st.composite
def numeric_comparison(draw: st.DrawFn) -> Tree:
    op = draw(st.sampled_from(list(ORDERINGS)))
    fn = ORDERINGS[op]
    prop = draw(st.sampled_from(INT_PROPS + FLOAT_PROPS))
    # an integer property meets integer or decimal constants; a decimal one only decimal constants (an integer
    # constant parses the property as a Java long, and '2.5' is not one)
    if prop in INT_PROPS and draw(st.booleans()):
        c_int = draw(ints)
        text, constant = int_text(c_int), float(c_int)
    else:
        c_float = draw(floats)
        text, constant = float_text(c_float), c_float
    if draw(st.booleans()):
        return atom(f"{prop} {op} {text}", lambda p: fn(float(p[prop]), constant))
    return atom(f"{text} {FLIP[op]} {prop}", lambda p: fn(float(p[prop]), constant))


@st.composite
def property_comparison(draw: st.DrawFn) -> Tree:
    left, right = draw(st.sampled_from(INT_PROPS + FLOAT_PROPS)), draw(st.sampled_from(INT_PROPS + FLOAT_PROPS))
    op = draw(st.sampled_from(list(ORDERINGS)))
    if op in ("=", "<>"):  # property = property compares the strings
        equal = op == "="
        return atom(f"{left} {op} {right}", lambda p: (p[left] == p[right]) is equal)
    fn = ORDERINGS[op]
    return atom(f"{left} {op} {right}", lambda p: fn(float(p[left]), float(p[right])))


@st.composite
def between(draw: st.DrawFn) -> Tree:
    negated = draw(st.booleans())
    keyword = "NOT BETWEEN" if negated else "BETWEEN"
    prop = draw(st.sampled_from(INT_PROPS + FLOAT_PROPS))
    if prop in INT_PROPS:
        lo_i, hi_i = sorted((draw(ints), draw(ints)))
        lo, hi, lo_text, hi_text = float(lo_i), float(hi_i), int_text(lo_i), int_text(hi_i)
    else:
        lo, hi = sorted((draw(floats), draw(floats)))
        lo_text, hi_text = float_text(lo), float_text(hi)
    return atom(
        f"{prop} {keyword} {lo_text} AND {hi_text}",
        lambda p: (lo <= float(p[prop]) <= hi) is not negated,
    )


@st.composite
def string_condition(draw: st.DrawFn) -> Tree:
    prop = draw(st.sampled_from(STR_PROPS))
    kind = draw(st.sampled_from(["=", "<>", "IN", "NOT IN", "CONTAINS", "STARTSWITH", "ENDSWITH"]))
    negated = draw(st.booleans())
    if kind in ("=", "<>"):
        c = draw(strings)
        equal = kind == "="
        return atom(f"{prop} {kind} {quote(c)}", lambda p: (p[prop] == c) is equal)
    if kind in ("IN", "NOT IN"):
        values = draw(st.lists(strings, min_size=1, max_size=4))
        inside = kind == "IN"
        sql = f"{prop} {kind} ({', '.join(quote(v) for v in values)})"
        return atom(sql, lambda p: (p[prop] in values) is inside)
    pattern = draw(strings)
    method = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}[kind]
    keyword = f"NOT {kind}" if negated else kind
    # an empty pattern never matches, in either form
    return atom(
        f"{prop} {keyword} {quote(pattern)}",
        lambda p: bool(pattern) and (method(p[prop], pattern) is not negated),
    )


@st.composite
def other_condition(draw: st.DrawFn) -> Tree:
    kind = draw(st.sampled_from(["bool=", "bare", "is null", "is not null", "missing is null", "constant"]))
    prop = draw(st.sampled_from(ALL_PROPS))
    if kind == "bool=":
        c = draw(st.booleans())
        return atom(f"f = {'TRUE' if c else 'FALSE'}", lambda p: (p["f"].lower() == "true") is c)
    if kind == "bare":
        return atom("f", lambda p: p["f"].lower() == "true")
    if kind == "is null":
        return atom(f"{prop} IS NULL", lambda p: False)
    if kind == "is not null":
        return atom(f"{prop} IS NOT NULL", lambda p: True)
    if kind == "missing is null":
        return atom("nowhere IS NULL", lambda p: True)
    c = draw(st.booleans())
    return atom("TRUE" if c else "FALSE", lambda p: c)


leaves = st.one_of(numeric_comparison(), property_comparison(), between(), string_condition(), other_condition())


def wrap(child: Tree, needed: int, paren: Callable[[], bool]) -> str:
    text = child.render(paren)
    return f"({text})" if child.precedence < needed or paren() else text


def combine(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    def not_(c: Tree) -> Tree:
        return Tree(lambda paren: "NOT " + wrap(c, PRECEDENCE_NOT, paren), PRECEDENCE_NOT, lambda p: not c.oracle(p))

    def and_(cs: tuple[Tree, Tree]) -> Tree:
        left, right = cs
        return Tree(
            # the right operand of a left-associative AND needs parentheses unless it binds tighter
            lambda paren: f"{wrap(left, PRECEDENCE_AND, paren)} AND {wrap(right, PRECEDENCE_AND + 1, paren)}",
            PRECEDENCE_AND,
            lambda p: left.oracle(p) and right.oracle(p),
        )

    def or_(cs: tuple[Tree, Tree]) -> Tree:
        left, right = cs
        return Tree(
            lambda paren: f"{wrap(left, PRECEDENCE_OR, paren)} OR {wrap(right, PRECEDENCE_OR + 1, paren)}",
            PRECEDENCE_OR,
            lambda p: left.oracle(p) or right.oracle(p),
        )

    pairs = st.tuples(children, children)
    return st.one_of(children.map(not_), pairs.map(and_), pairs.map(or_))


trees = st.recursive(leaves, combine, max_leaves=8)


@st.composite
def messages(draw: st.DrawFn) -> Props:
    props: Props = {}
    for name in INT_PROPS:
        props[name] = str(draw(ints))
    for name in FLOAT_PROPS:
        props[name] = draw(st.one_of(floats.map(repr), ints.map(str)))
    for name in STR_PROPS:
        props[name] = draw(strings)
    for name in BOOL_PROPS:
        props[name] = draw(st.sampled_from(["true", "false", "TRUE", "False", "yes", ""]))
    return props


@st.composite
def sql_texts(draw: st.DrawFn) -> str:
    tree = draw(trees)
    return tree.render(lambda: draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(tree=trees, props=messages(), data=st.data())
def test_matches_the_oracle_and_not_is_negation(tree: Tree, props: Props, data: st.DataObject) -> None:
    sql = tree.render(lambda: data.draw(st.booleans(), label="parenthesize"))
    expected = tree.oracle(props)
    assert compile_sql92(sql).evaluate(props) is expected, sql
    # every referenced property present with a valid value: no UNKNOWN anywhere, so NOT is plain negation
    assert compile_sql92(f"NOT ({sql})").evaluate(props) is (not expected), sql


EXPRESSIONS = [
    "a > 5 AND b = 'abc'",
    "a >= 1.5 OR a < -2 OR a <= 0 OR a = 10L OR a <> 3",
    "a > b AND a = b OR a <> b",
    "a BETWEEN 1 AND 5 AND x NOT BETWEEN 1.5 AND 2.5 AND a BETWEEN b AND x",
    "s IN ('x', 'y') OR s NOT IN ('z') OR s = '' OR s <> 'q'",
    "s CONTAINS 'a' OR s NOT CONTAINS 'b' OR s STARTSWITH 'c' OR s NOT STARTSWITH 'd'",
    "s ENDSWITH 'e' OR s NOT ENDSWITH 'f' OR s CONTAINS ''",
    "f = TRUE OR f <> FALSE OR f OR NOT f",
    "a IS NULL OR b IS NOT NULL OR (a > 1) IS NULL",
    "(a > 1) = (b > 1) OR (a > 1) = f OR a = 1 = TRUE",
    "NOT (a > 1 AND (s = 'x' OR NOT f)) AND TRUE",
    "'5' = a OR 5 < a OR 1.5 >= x",
]
keys = st.sampled_from([*ALL_PROPS, "A", "nowhere", ""]) | st.text(max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(EXPRESSIONS) - 1),
    props=st.dictionaries(keys, st.text(max_size=8) | st.sampled_from(["1", "-2", "2.5", "1e3", "true", " 1"])),
)
def test_evaluate_never_raises_and_never_matches_both_ways(index: int, props: Props) -> None:
    sql = EXPRESSIONS[index]
    result = compile_sql92(sql).evaluate(props)
    negated = compile_sql92(f"NOT ({sql})").evaluate(props)
    assert isinstance(result, bool) and isinstance(negated, bool)
    assert not (result and negated)  # UNKNOWN may make both false, never both true


@settings(max_examples=200, deadline=None)
@given(sql=sql_texts(), props=st.dictionaries(st.sampled_from(ALL_PROPS), st.text(max_size=6)))
def test_generated_expressions_on_arbitrary_messages(sql: str, props: Props) -> None:
    expr = compile_sql92(sql)
    negated = compile_sql92(f"NOT ({sql})")
    assert not (expr.evaluate(props) and negated.evaluate(props))


TOKENS = [
    "a", "b", "s", "5", "-", "+", "1.5", "'x'", "''", "'", "(", ")", ",", "=", "<>", ">", ">=", "<", "<=", "AND",
    "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH", "ENDSWITH", "--", "/*",
    "*/", "!", ".", "10L", "1e", "$",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(sql=st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join) | st.text(max_size=30))
def test_compile_accepts_or_raises_the_filter_error_only(sql: str) -> None:
    try:
        expr = compile_sql92(sql)
    except MQError as exc:
        assert exc.code is Code.ILLEGAL_FILTER_EXPRESSION
        assert "SQL92 expression" in exc.message
        return
    assert isinstance(expr, Sql92Expression)
    assert isinstance(expr.evaluate({"a": "1", "b": "x", "s": "true"}), bool)
