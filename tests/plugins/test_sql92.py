"""SQL92 selector: every operator, precedence, RocketMQ's type rules, and every compile error with its position."""

from __future__ import annotations

import pytest

from orbitmq.errors import Code, MQError
from plugins.filters_sql92 import MAX_DEPTH, MAX_EXPRESSION_LENGTH, Sql92Expression, compile_sql92


def ev(expression: str, **props: str) -> bool:
    return compile_sql92(expression).evaluate(props)


def compile_error(expression: str) -> str:
    with pytest.raises(MQError) as info:
        compile_sql92(expression)
    assert info.value.code is Code.ILLEGAL_FILTER_EXPRESSION
    return info.value.message


# ---------------------------------------------------------------------- the API
def test_api_shape() -> None:
    expr = compile_sql92("a > 5 AND b IN ('x','y')")
    assert isinstance(expr, Sql92Expression)
    assert expr.expression == "a > 5 AND b IN ('x','y')"
    assert expr.referenced_properties == frozenset({"a", "b"})
    assert expr.evaluate({"a": "6", "b": "y"}) is True
    assert expr.evaluate({"a": "6", "b": "z"}) is False
    # equal by source text, so a filter holding one can be a dict key or compared after a recompile
    assert expr == compile_sql92("a > 5 AND b IN ('x','y')")
    assert hash(expr) == hash(compile_sql92("a > 5 AND b IN ('x','y')"))


def test_the_documented_example() -> None:
    expr = compile_sql92("a > 5 AND b = 'abc'")
    assert expr.evaluate({"a": "10", "b": "abc", "c": "true"})
    assert not expr.evaluate({"a": "1", "b": "abc", "c": "true"})
    assert ev("a between 0 and 3", a="3")
    assert not ev("a between 0 and 3", a="4")


# ---------------------------------------------------------------------- numeric comparisons
@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("a > 5", "6", True),
        ("a > 5", "5", False),
        ("a >= 5", "5", True),
        ("a >= 5", "4", False),
        ("a < 5", "4", True),
        ("a < 5", "5", False),
        ("a <= 5", "5", True),
        ("a <= 5", "6", False),
        ("a = 5", "5", True),
        ("a = 5", "6", False),
        ("a <> 5", "6", True),
        ("a <> 5", "5", False),
        ("a = -5", "-5", True),
        ("a > -5", "-4", True),
        ("a = +5", "+5", True),  # Java Long.valueOf accepts a '+' sign
        ("a = 5", "005", True),  # and leading zeros
        ("a = 10L", "10", True),  # Java long suffix on the constant
        ("a = 10l", "10", True),
        ("a = 9223372036854775807", "9223372036854775807", True),
        ("a = -9223372036854775808", "-9223372036854775808", True),
        ("a > 5", "3000000000", True),
        ("a > 3.1415", "3.2", True),
        ("a > 3.1415", "3", False),
        ("a = 5.0", "5", True),  # a decimal constant parses the property as a double
        ("a = 5.", "5.0", True),
        ("a = .5", "0.5", True),
        ("a = 1E3", "1000", True),
        ("a = 1.5e-1", "0.15", True),
        ("a = 2.5", " 2.5 ", True),  # Double.valueOf trims
        ("a = 2.5", "2.5f", True),  # and takes a float/double suffix
        ("a = 2.5", "2.5D", True),
        ("a < 0.0", "-1e300", True),
        ("5 < a", "6", True),  # constant on the left: same rules
        ("5 >= a", "6", False),
        ("5 = a", "5", True),
        ("a > b", "", False),  # b missing
    ],
)
def test_numeric_comparisons(expression: str, value: str, expected: bool) -> None:
    assert ev(expression, a=value) is expected


@pytest.mark.parametrize(
    "value",
    ["5.5", " 5", "5 ", "abc", "", "5L", "1_000", "٥", "²", "0x10", "9223372036854775808", "1" * 5000, "+", "-"],
)
def test_integer_constant_needs_an_integer_property(value: str) -> None:
    # RocketMQ converts with Long/Integer.valueOf: anything else is no match, both ways round, never an error
    for op in (">", ">=", "<", "<=", "=", "<>"):
        assert ev(f"a {op} 5", a=value) is False
        assert ev(f"NOT (a {op} 5)", a=value) is False  # UNKNOWN, not FALSE: NOT does not turn it into a match


@pytest.mark.parametrize("value", ["abc", "", "NaN", "Infinity", "-Infinity", "inf", "nan", "0x1p3", "1.5.5", "1e"])
def test_decimal_constant_needs_a_numeric_property(value: str) -> None:
    for op in (">", ">=", "<", "<=", "=", "<>"):
        assert ev(f"a {op} 1.5", a=value) is False
        assert ev(f"NOT (a {op} 1.5)", a=value) is False


def test_property_against_property() -> None:
    assert ev("a > b", a="10", b="9")  # ordering: both parsed as doubles, 10 > 9 (not '10' < '9')
    assert ev("a > b", a="1.5", b="1")
    assert not ev("a > b", a="x", b="1")
    assert ev("a = b", a="x", b="x")  # equality: strings
    assert not ev("a = b", a="1", b="1.0")
    assert ev("a <> b", a="1", b="1.0")
    assert not ev("a = b")  # both missing is UNKNOWN (RocketMQ says TRUE)
    assert not ev("a = b", a="x")


def test_constant_only_comparisons() -> None:
    assert ev("1 = 1")
    assert ev("1 < 2.5")
    assert ev("'x' = 'x'")
    assert ev("'5' = 5")  # a string meets a number: converted, as a property value would be
    assert not ev("'x' = 5")
    assert ev("TRUE = TRUE")
    assert ev("TRUE <> FALSE")
    assert not ev("1 > 2")


# ---------------------------------------------------------------------- BETWEEN
@pytest.mark.parametrize(
    ("value", "inside"),
    [("0", True), ("3", True), ("1", True), ("-1", False), ("4", False)],
)
def test_between_is_inclusive(value: str, inside: bool) -> None:
    assert ev("a BETWEEN 0 AND 3", a=value) is inside
    assert ev("a NOT BETWEEN 0 AND 3", a=value) is not inside


def test_between_variants() -> None:
    assert ev("a BETWEEN 1.5 AND 2.5", a="2.5")
    assert ev("a BETWEEN -2 AND -1", a="-2")
    assert ev("a BETWEEN 3 AND 3", a="3")
    assert ev("a BETWEEN b AND c", a="2", b="1", c="3")
    assert not ev("a BETWEEN b AND c", a="2", b="1")
    assert ev("a BETWEEN 1 AND 2.5", a="2")  # mixed bounds: each bound converts its own way
    assert not ev("a BETWEEN 1 AND 2.5", a="2.2")  # '2.2' is not an integer for the '>= 1' half
    assert ev("a NOT BETWEEN 5 AND 1", a="3")  # reversed bounds are refused only for BETWEEN, as in RocketMQ
    assert ev("2 BETWEEN 1 AND 3")
    assert ev("a between 0 and 3 and b = 'x'", a="1", b="x")  # the AND of BETWEEN is not the logical AND
    for expression in ("a BETWEEN 0 AND 3", "a NOT BETWEEN 0 AND 3"):
        assert not ev(expression)
        assert not ev(expression, a="x")
        assert not ev(f"NOT ({expression})", a="x")


# ---------------------------------------------------------------------- strings
def test_string_equality() -> None:
    assert ev("b = 'abc'", b="abc")
    assert not ev("b = 'abc'", b="ABC")  # case-sensitive
    assert not ev("b = 'abc'", b="abc ")
    assert ev("b <> 'abc'", b="abd")
    assert not ev("b <> 'abc'", b="abc")
    assert ev("'abc' = b", b="abc")
    assert ev("b = ''", b="")
    assert ev("b = '10'", b="10")
    assert not ev("b = '10'", b="10.0")


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("'it''s'", "it's"),
        ("''''", "'"),
        ("''''''", "''"),
        ("'a''''b'", "a''b"),
        ("'中文'", "中文"),
        ("'--not a comment'", "--not a comment"),
        ("'/* nor this */'", "/* nor this */"),
        ("'a\nb'", "a\nb"),
        ("'AND OR NOT'", "AND OR NOT"),
    ],
)
def test_string_literals(literal: str, value: str) -> None:
    assert ev(f"b = {literal}", b=value)
    assert ev(f"b IN ('zz', {literal})", b=value)


def test_in_and_not_in() -> None:
    assert ev("b IN ('x', 'y')", b="x")
    assert ev("b IN ('x', 'y')", b="y")
    assert not ev("b IN ('x', 'y')", b="z")
    assert ev("b NOT IN ('x', 'y')", b="z")
    assert not ev("b NOT IN ('x', 'y')", b="x")
    assert ev("b IN ('only')", b="only")
    many = ", ".join(f"'v{i}'" for i in range(100))
    assert ev(f"b IN ({many})", b="v99")
    assert not ev(f"b IN ({many})", b="v100")
    assert ev("b IN ('1', '2')", b="1")
    assert not ev("b IN ('1', '2')", b="1.0")  # membership is string equality
    assert ev("b in ('x') and c not in ('y')", b="x", c="z")
    for expression in ("b IN ('x')", "b NOT IN ('x')"):
        assert not ev(expression)
        assert not ev(f"NOT ({expression})")


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("s CONTAINS 'bc'", "abcd", True),
        ("s CONTAINS 'bc'", "acbd", False),
        ("s NOT CONTAINS 'bc'", "acbd", True),
        ("s NOT CONTAINS 'bc'", "abcd", False),
        ("s STARTSWITH 'ab'", "abcd", True),
        ("s STARTSWITH 'ab'", "xabcd", False),
        ("s NOT STARTSWITH 'ab'", "xab", True),
        ("s NOT STARTSWITH 'ab'", "abx", False),
        ("s ENDSWITH 'cd'", "abcd", True),
        ("s ENDSWITH 'cd'", "abcdx", False),
        ("s NOT ENDSWITH 'cd'", "abcdx", True),
        ("s NOT ENDSWITH 'cd'", "cd", False),
        ("s contains 'AB'", "ab", False),  # case-sensitive
        ("s startswith 'it''s'", "it's me", True),
        # an empty pattern never matches, in either form (RocketMQ's rule)
        ("s CONTAINS ''", "abc", False),
        ("s NOT CONTAINS ''", "abc", False),
        ("s STARTSWITH ''", "abc", False),
        ("s NOT ENDSWITH ''", "abc", False),
        ("NOT (s CONTAINS '')", "abc", True),
    ],
)
def test_string_matching(expression: str, value: str, expected: bool) -> None:
    assert ev(expression, s=value) is expected


def test_string_matching_on_literals_and_missing() -> None:
    assert ev("'abc' CONTAINS 'b'")
    assert ev("'abc' NOT ENDSWITH 'b'")
    for op in ("CONTAINS", "NOT CONTAINS", "STARTSWITH", "NOT STARTSWITH", "ENDSWITH", "NOT ENDSWITH"):
        assert not ev(f"s {op} 'x'")
        assert not ev(f"NOT (s {op} 'x')")  # UNKNOWN (RocketMQ: FALSE, so its NOT would match)


# ---------------------------------------------------------------------- booleans and NULL
@pytest.mark.parametrize(
    ("value", "is_true"),
    [("true", True), ("TRUE", True), ("True", True), ("false", False), ("FALSE", False), ("no", False), ("", False)],
)
def test_boolean_comparisons_use_java_boolean_valueof(value: str, is_true: bool) -> None:
    assert ev("c = TRUE", c=value) is is_true
    assert ev("c = FALSE", c=value) is not is_true  # any string but 'true' is FALSE, as Boolean.valueOf says
    assert ev("c <> TRUE", c=value) is not is_true
    assert ev("TRUE = c", c=value) is is_true
    assert ev("c", c=value) is is_true  # a bare property as a condition is ``c = TRUE``
    assert ev("NOT c", c=value) is not is_true
    assert ev("c AND a = 1", c=value, a="1") is is_true


def test_boolean_constants_and_conditions_as_values() -> None:
    assert ev("TRUE")
    assert not ev("FALSE")
    assert ev("NOT FALSE")
    assert not ev("NULL")
    assert not ev("NOT NULL")
    assert ev("(a > 1) = TRUE", a="2")
    assert ev("(a > 1) = FALSE", a="0")
    assert not ev("(a > 1) = TRUE")  # UNKNOWN compared is UNKNOWN
    assert ev("(a > 1) = (b > 1)", a="2", b="3")
    assert ev("a = 1 = TRUE", a="1")  # chained: (a = 1) = TRUE
    assert ev("(a > 1) = c", a="2", c="true")


def test_is_null() -> None:
    assert ev("a IS NULL")
    assert not ev("a IS NULL", a="")
    assert ev("a IS NOT NULL", a="")
    assert not ev("a IS NOT NULL")
    assert ev("a is not null and b is null", a="1")
    assert ev("NOT (a IS NULL)", a="1")
    assert ev("(a > 1) IS NULL")  # a condition that is UNKNOWN is NULL
    assert ev("(a > 1) IS NULL", a="x")
    assert ev("(a > 1) IS NOT NULL", a="2")
    assert not ev("5 IS NULL")
    assert ev("NULL IS NULL")


# ---------------------------------------------------------------------- missing properties, every operator
MISSING = [
    "a > 1",
    "a >= 1",
    "a < 1",
    "a <= 1",
    "a = 1",
    "a <> 1",
    "a > 1.5",
    "a = 'x'",
    "a <> 'x'",
    "a = TRUE",
    "a <> FALSE",
    "a = b",
    "a <> b",
    "a > b",
    "a BETWEEN 1 AND 2",
    "a NOT BETWEEN 1 AND 2",
    "a IN ('x')",
    "a NOT IN ('x')",
    "a CONTAINS 'x'",
    "a NOT CONTAINS 'x'",
    "a STARTSWITH 'x'",
    "a NOT STARTSWITH 'x'",
    "a ENDSWITH 'x'",
    "a NOT ENDSWITH 'x'",
    "a",
    "(a > 1) = TRUE",
]


@pytest.mark.parametrize("expression", MISSING)
def test_missing_property_is_no_match_even_negated(expression: str) -> None:
    assert ev(expression, other="1") is False
    assert ev(f"NOT ({expression})", other="1") is False


# ---------------------------------------------------------------------- logic: three-valued, precedence
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # a = 1 is TRUE, z = 1 is UNKNOWN (z missing), b = 1 is FALSE
        ("a = 1 AND z = 1", False),
        ("NOT (a = 1 AND z = 1)", False),  # TRUE AND UNKNOWN is UNKNOWN
        ("b = 1 AND z = 1", False),
        ("NOT (b = 1 AND z = 1)", True),  # FALSE AND UNKNOWN is FALSE
        ("z = 1 AND b = 1", False),
        ("NOT (z = 1 AND b = 1)", True),
        ("a = 1 OR z = 1", True),  # TRUE OR UNKNOWN is TRUE
        ("z = 1 OR a = 1", True),
        ("b = 1 OR z = 1", False),
        ("NOT (b = 1 OR z = 1)", False),  # FALSE OR UNKNOWN is UNKNOWN
        ("a = 1 AND a = 1 AND z = 1", False),
        ("NOT (a = 1 AND a = 1 AND z = 1)", False),
        ("a = 1 AND z = 1 AND b = 1", False),
        ("NOT (a = 1 AND z = 1 AND b = 1)", True),
        ("b = 1 OR b = 1 OR z = 1", False),
        ("NOT (b = 1 OR b = 1 OR z = 1)", False),
        ("b = 1 OR z = 1 OR a = 1", True),
        ("a = 1 AND a = 1 AND a = 1", True),
        ("b = 1 OR b = 1 OR b = 1", False),
        ("NOT (b = 1 OR b = 1 OR b = 1)", True),
        # NOT binds tighter than AND, AND tighter than OR
        ("a = 1 OR b = 1 AND b = 1", True),  # a = 1 OR (b = 1 AND b = 1)
        ("(a = 1 OR b = 1) AND b = 1", False),
        ("b = 1 AND b = 1 OR a = 1", True),
        ("b = 1 AND (b = 1 OR a = 1)", False),
        ("NOT b = 1 AND a = 1", True),  # (NOT b = 1) AND a = 1
        ("NOT a = 1 OR a = 1", True),  # (NOT a = 1) OR a = 1
        ("NOT (a = 1 OR a = 1)", False),
        ("NOT a = 1 AND a = 1", False),
        ("NOT NOT a = 1", True),
        ("NOT NOT NOT a = 1", False),
        ("((a = 1))", True),
        ("(((a = 1) AND ((b = 2))))", True),
        ("a = 1 AND (b = 1 OR (c = 1 OR b = 2))", True),
    ],
)
def test_logic(expression: str, expected: bool) -> None:
    assert ev(expression, a="1", b="2", c="3") is expected


def test_keywords_are_case_insensitive_and_names_are_not() -> None:
    assert ev("a between 1 and 3 AnD b iN ('x') oR c Is NuLl", a="2", b="x")
    assert ev("not (a > 1) or A > 1", A="2", a="0")
    assert not ev("A > 1", a="2")
    assert ev("c = true and d = False", c="TRUE", d="false")
    assert ev("s contains 'a' and s startsWith 'a' and s EndsWith 'a'", s="aba")


def test_identifiers() -> None:
    assert ev("_a$1 = 'x'", _a_1="y", **{"_a$1": "x"})
    assert ev("$x = 1", **{"$x": "1"})
    assert ev("order.type = 'x'", **{"order.type": "x"})
    assert ev("TAGS = 'TagA'", TAGS="TagA")
    assert ev("notx = 1 and andy = 2 and order_ = 3 and isnull = 4", notx="1", andy="2", order_="3", isnull="4")
    assert compile_sql92("x.y > 1 and $z is null").referenced_properties == {"x.y", "$z"}


def test_whitespace_and_comments() -> None:
    assert ev("\ta\n>\r1\f", a="2")
    assert ev("a>1AND b='x'", a="2", b="x")  # no space needed where the tokens cannot run together
    assert ev("a > 1 -- the rest is a comment AND b = 'x'", a="2")
    assert ev("a > 1 -- first line\n AND b = 'x'", a="2", b="x")
    assert not ev("a > 1 -- first line\n AND b = 'x'", a="2", b="y")
    assert ev("a /* inline */ > /* multi\nline */ 1", a="2")
    assert ev("a > 1/**/", a="2")


def test_signs() -> None:
    assert ev("a = - 5", a="-5")
    assert ev("a = - -5", a="5")
    assert ev("a = +-5", a="-5")
    assert ev("a > -1.5", a="-1")
    assert ev("+a > 1", a="2")  # RocketMQ lets +a stand for a
    # a sign is a token of its own (there is no arithmetic), so 5-3 is two operands in a row
    assert compile_error("a = 5-3") == "SQL92 expression 'a = 5-3': unexpected '-' at position 5"


def test_referenced_properties() -> None:
    assert compile_sql92("TRUE").referenced_properties == frozenset()
    expression = "a > 1 AND (b IN ('x') OR c IS NULL) AND NOT d CONTAINS 'x' AND e BETWEEN f AND 3 AND g"
    assert compile_sql92(expression).referenced_properties == set("abcdefg")


def test_evaluate_never_raises_on_sloppy_input() -> None:
    expr = compile_sql92("a > 5 AND b = 'x' AND c CONTAINS 'y' AND d IN ('z')")
    assert expr.evaluate({"a": 6, "b": None, "c": 3, "d": ["z"]}) is False  # type: ignore[dict-item]
    assert expr.evaluate({}) is False


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("a >> 3", "unexpected '>' at position 3"),
        ("a > ", "unexpected end of expression at position 4"),
        ("a > 1 b", "unexpected 'b' at position 6"),
        ("a > 1)", "unexpected ')' at position 5"),
        ("(a > 1", "unexpected end of expression, expected ')' at position 6"),
        ("a == 1", "unexpected '=' at position 3"),
        ("a != 1", "unexpected character '!' at position 2"),
        ("a > 1 && b > 1", "unexpected character '&' at position 6"),
        ("a = 'abc", "unterminated string literal at position 4"),
        ("a = 1 /* no end", "unterminated comment at position 6"),
        ('a = "x"', "unexpected character '\"' at position 4"),
        ("a = 1 AND", "unexpected end of expression at position 9"),
        ("AND a = 1", "unexpected 'AND' at position 0"),
        ("a = 1 OR OR b = 1", "unexpected 'OR' at position 9"),
        ("a NOT > 1", "unexpected 'NOT' at position 2"),
        ("a LIKE 'x%'", "unexpected 'LIKE' at position 2"),
        ("a IS 1", "unexpected '1', expected NULL at position 5"),
        ("a IS NOT 1", "unexpected '1', expected NULL at position 9"),
        ("a BETWEEN 1 OR 2", "unexpected 'OR', expected AND at position 12"),
        ("a BETWEEN 1", "unexpected end of expression, expected AND at position 11"),
        ("a IN 'x'", "unexpected \"'x'\", expected '(' at position 5"),
        ("a IN ()", "unexpected ')', expected a string literal (IN lists hold strings) at position 6"),
        ("a IN (1, 2)", "unexpected '1', expected a string literal (IN lists hold strings) at position 6"),
        ("a IN ('x' 'y')", "unexpected \"'y'\", expected ',' or ')' at position 10"),
        ("a IN ('x',)", "unexpected ')', expected a string literal (IN lists hold strings) at position 10"),
        ("a CONTAINS b", "unexpected 'b', expected a string literal at position 11"),
        ("a NOT STARTSWITH 1", "unexpected '1', expected a string literal at position 17"),
        ("a = 05", "unexpected '5' at position 5"),
        ("a = 1.2.3", "unexpected '.3' at position 7"),
        ("a > 1e", "unexpected 'e' at position 5"),
        ("a = 0L1", "unexpected '1' at position 6"),
        ("1a = 1", "unexpected 'a' at position 1"),
        ("a = .", "unexpected character '.' at position 4"),
        ("a = 'x' -- ok\n#", "unexpected character '#' at position 14"),
        ("a = 'ü' AND ä = 1", "unexpected character 'ä' at position 12"),
        # type errors (RocketMQ's compile-time checks)
        ("a > 'x'", "'x' cannot be compared with '>': only numbers and properties can at position 4"),
        ("'x' <= a", "'x' cannot be compared with '<=': only numbers and properties can at position 0"),
        ("a < TRUE", "'TRUE' cannot be compared with '<': only numbers and properties can at position 4"),
        ("a >= NULL", "'NULL' cannot be compared with '>=': only numbers and properties can at position 5"),
        ("(a > 1) > 0", "'(a > 1)' cannot be compared with '>': only numbers and properties can at position 0"),
        ("a > 1 > 0", "'a > 1' cannot be compared with '>': only numbers and properties can at position 0"),
        ("a BETWEEN 'x' AND 'y'", "'x' cannot be compared with 'BETWEEN': only numbers and properties can"),
        ("'x' BETWEEN 1 AND 2", "'x' cannot be compared with 'BETWEEN': only numbers and properties can"),
        ("a BETWEEN 1 AND TRUE", "'TRUE' cannot be compared with 'BETWEEN'"),
        ("a BETWEEN 5 AND 1", "BETWEEN bounds are reversed: '5' is greater than '1' at position 10"),
        ("a BETWEEN 1.5 AND -1", "BETWEEN bounds are reversed: '1.5' is greater than '-1' at position 10"),
        ("a = NULL", "NULL cannot be compared with '=' or '<>', use IS NULL or IS NOT NULL at position 4"),
        ("NULL <> a", "NULL cannot be compared with '=' or '<>', use IS NULL or IS NOT NULL at position 0"),
        ("TRUE = 1", "'TRUE' and '1' cannot be compared: a boolean only equals a boolean or a property at position 5"),
        ("'x' = FALSE", "cannot be compared: a boolean only equals a boolean or a property at position 4"),
        ("(a > 1) = 'x'", "cannot be compared: a boolean only equals a boolean or a property at position 8"),
        ("5 IN ('x')", "IN needs a property on its left, got '5' at position 0"),
        (
            "(a) IN ('x')",
            "",
        ),  # parentheses around a property are still a property
        ("'x' NOT IN ('x')", "IN needs a property on its left, got 'x' at position 0"),
        ("5 CONTAINS 'x'", "CONTAINS needs a property or a string on its left, got '5' at position 0"),
        ("(a > 1) NOT ENDSWITH 'x'", "ENDSWITH needs a property or a string on its left, got '(a > 1)'"),
        ("-a > 1", "only a number can follow a sign, got 'a' at position 0"),
        ("a > -'x'", "only a number can follow a sign, got 'x' at position 4"),
        ("a = -TRUE", "only a number can follow a sign, got 'TRUE' at position 4"),
        ("a = +(1)", ""),  # a parenthesized number is still a number
        ("5", "'5' is not a condition (expected a comparison, a property, TRUE or FALSE) at position 0"),
        ("'x'", "'x' is not a condition"),
        ("a > 1 AND 5", "'5' is not a condition (expected a comparison, a property, TRUE or FALSE) at position 10"),
        ("1.5 OR a", "'1.5' is not a condition"),
        ("NOT 'x'", "'x' is not a condition (expected a comparison, a property, TRUE or FALSE) at position 4"),
        ("(5)", "'(5)' is not a condition"),
        ("9223372036854775808 > a", "integer '9223372036854775808' is out of the 64-bit range at position 0"),
        ("a > -9223372036854775809", "integer '-9223372036854775809' is out of the 64-bit range at position 4"),
        ("a > 1e999", "number '1e999' is out of range at position 4"),
    ],
)
def test_compile_errors(expression: str, message: str) -> None:
    if not message:
        compile_sql92(expression)  # the cases that look wrong but are fine
        return
    text = compile_error(expression)
    assert text.startswith("SQL92 expression ")
    assert message in text, text


def test_error_message_format() -> None:
    assert compile_error("a >> 3") == "SQL92 expression 'a >> 3': unexpected '>' at position 3"
    with pytest.raises(MQError) as info:
        compile_sql92("a >> 3")
    expected = "ILLEGAL_FILTER_EXPRESSION(40010): SQL92 expression 'a >> 3': unexpected '>' at position 3"
    assert str(info.value) == expected


@pytest.mark.parametrize("expression", ["", " ", "\t\n ", "-- only a comment", "/* only */"])
def test_empty_expression(expression: str) -> None:
    assert "the expression is empty" in compile_error(expression)


def test_length_limit() -> None:
    clauses = ["b = 1"]
    while len(" OR ".join([*clauses, "a = 'x'"])) <= MAX_EXPRESSION_LENGTH:
        clauses.append("a = 'x'")
    long_ok = " OR ".join(clauses)
    assert MAX_EXPRESSION_LENGTH - 20 < len(long_ok) <= MAX_EXPRESSION_LENGTH
    assert compile_sql92(long_ok).evaluate({"b": "1"})
    exactly = "a = '" + "x" * (MAX_EXPRESSION_LENGTH - 6) + "'"
    assert len(exactly) == MAX_EXPRESSION_LENGTH
    assert compile_sql92(exactly).evaluate({"a": "x" * (MAX_EXPRESSION_LENGTH - 6)})
    too_long = exactly + " "
    message = compile_error(too_long)
    limit = f"the expression is {MAX_EXPRESSION_LENGTH + 1} characters long, the limit is {MAX_EXPRESSION_LENGTH}"
    assert message.endswith(limit)
    assert len(message) < 300  # the echo of a long expression is shortened


def test_nesting_limit() -> None:
    deep_ok = "(" * MAX_DEPTH + "a = 1" + ")" * MAX_DEPTH
    assert ev(deep_ok, a="1")
    assert "nested more than 50 levels deep at position 50" in compile_error(
        "(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1)
    )
    assert "nested more than 50 levels deep" in compile_error("NOT " * (MAX_DEPTH + 1) + "a = 1")
    signs = "- " * (MAX_DEPTH + 1)  # spaced: "--" starts a comment
    assert "nested more than 50 levels deep" in compile_error(f"a = {signs}1")
    # chained comparisons nest without parentheses
    assert "nested more than 50 levels deep" in compile_error("a = 1" + " = TRUE" * (MAX_DEPTH + 1))
    assert ev("a = 1" + " = TRUE" * (MAX_DEPTH - 2), a="1")
    # long flat chains are fine: AND/OR operands are one level
    assert ev(" OR ".join(f"a = {i}" for i in range(300)), a="299")
