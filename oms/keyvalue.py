"""``KeyValue``: the OMS attribute/header map, a ``MutableMapping[str, str]`` with Java's typed getters.

Values are stored as strings, as OMS Java's ``DefaultKeyValue`` does; ``None`` is refused instead of "null".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any


def _to_string(key: str, value: object) -> str:
    if value is None:
        raise TypeError(f"value of {key!r} is None; KeyValue stores strings (remove the key instead)")
    if isinstance(value, bool):
        return "true" if value else "false"  # Java's spelling, so get_boolean and Java agree
    if isinstance(value, int | float | str):
        return str(value)
    raise TypeError(f"value of {key!r} must be int, float, bool or str, not {type(value).__name__}")


class KeyValue(MutableMapping[str, str]):
    """String keys to string values; ``put`` is chainable; ``get_int``/``get_double``... parse on read."""

    __slots__ = ("_data",)

    def __init__(self, initial: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._data: dict[str, str] = {}  # read and written in bulk by oms.message's batch helpers too
        if not initial and not kwargs:  # most maps start empty (two per message built)
            return
        for key, value in {**(initial or {}), **kwargs}.items():
            self[key] = value

    # -- mapping protocol ---------------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str) or not key:
            raise TypeError(f"KeyValue keys are non-empty strings, got {key!r}")
        self._data[key] = _to_string(key, value)

    def set_trusted(self, key: str, value: str) -> None:
        """Set a string ``__setitem__`` would store as it is (a message id the library made, a non-empty ``str``
        topic a message is built with), without its checks: the producer stamps one per message."""
        self._data[key] = value

    def as_dict(self) -> dict[str, str]:
        """The map itself, not a copy: for the library's batched paths, which only read it (a ``Mapping`` call
        per header and message costs more than the send of a small message)."""
        return self._data

    def get(self, key: str, default: Any = None) -> Any:
        # Mapping.get goes through __getitem__ and KeyError: the producer reads ~25 headers per message.
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"KeyValue({self._data!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    # -- OMS API ------------------------------------------------------------------------------------------------

    def put(self, key: str, value: int | float | bool | str) -> KeyValue:
        self[key] = value
        return self

    def get_string(self, key: str, default: str | None = None) -> str | None:
        return self._data.get(key, default)

    def get_int(self, key: str, default: int = 0) -> int:
        raw = self._data.get(key)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            return int(float(raw))  # "5000.0" from a config file still means 5000

    get_long = get_int

    def get_double(self, key: str, default: float = 0.0) -> float:
        raw = self._data.get(key)
        return default if raw is None or raw == "" else float(raw)

    def get_boolean(self, key: str, default: bool = False) -> bool:
        raw = self._data.get(key)
        if raw is None or raw == "":
            return default
        return raw.strip().lower() in ("true", "1", "yes", "on")

    def key_set(self) -> set[str]:
        return set(self._data)

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def copy(self) -> KeyValue:
        return KeyValue(self._data)

    @classmethod
    def _trusted(cls, data: dict[str, str]) -> KeyValue:
        """Adopt ``data`` (non-empty string keys to strings, checked by the caller) without copying or checking:
        the consumer builds a dozen headers per received record and the checks cost more than the building."""
        kv = cls.__new__(cls)
        kv._data = data
        return kv


def new_key_value(initial: Mapping[str, Any] | None = None, **kwargs: Any) -> KeyValue:
    """``OMS.newKeyValue()``; keyword arguments become keys verbatim (``new_key_value(TIMEOUT=3000)``)."""
    return KeyValue(initial, **kwargs)


def as_key_value(attributes: Mapping[str, Any] | None) -> KeyValue:
    """A private copy of ``attributes`` (None -> empty)."""
    return KeyValue(attributes) if attributes else KeyValue()
