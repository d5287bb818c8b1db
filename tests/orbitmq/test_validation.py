"""``UserPropertiesCheck`` (many messages' properties, names checked once) against ``validate_user_properties``."""

from __future__ import annotations

import pytest

from orbitmq.errors import MQError
from orbitmq.limits import MAX_PROPERTY_COUNT
from orbitmq.validation import UserPropertiesCheck, validate_user_properties

VALID = [
    {"a": "1"},
    {"a": "22", "b": "x y"},
    {"a": "héllo", "ключ": "значение"},  # non-ASCII sizes count UTF-8 bytes
    {},
    {"b": ""},
]
REFUSED = [
    {"a": "bad\x01value"},  # a name already checked, a value with a control character
    {" ": "v"},
    {"UNIQ_KEY": "forged"},
    {"new\x02name": "v"},
    {f"k{i}": "v" for i in range(MAX_PROPERTY_COUNT + 1)},
]


def test_sizes_equal_validate_user_properties() -> None:
    check = UserPropertiesCheck()
    for _ in range(2):  # names unseen, then cached
        assert [check(p) for p in VALID] == [validate_user_properties(p) for p in VALID]


@pytest.mark.parametrize("props", REFUSED)
def test_refusals_equal_validate_user_properties(props: dict[str, str]) -> None:
    check = UserPropertiesCheck()
    for p in VALID:
        check(p)
    with pytest.raises(MQError) as expected:
        validate_user_properties(props)
    with pytest.raises(MQError) as got:
        check(props)
    assert (got.value.code, got.value.message) == (expected.value.code, expected.value.message)
    assert check({"a": "still fine"}) == validate_user_properties({"a": "still fine"})
