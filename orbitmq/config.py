"""Reading RocketMQ-style ``.properties`` files into typed dataclasses.

Config classes declare their fields in RocketMQ's camelCase spelling; this module does the parsing.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration key or value that cannot be used; the message names the key."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text (``key=value`` or ``key: value``, ``#``/``!`` comments)."""
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                key, value = line[:i].strip(), line[i + 1 :].strip()
                if ch.isspace() and value[:1] in ("=", ":"):
                    value = value[1:].strip()
                break
        else:
            key, value = line, ""
        result[key] = value
    return result


def load_properties(path: str | Path) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"))


def _convert(key: str, raw: str, target: Any) -> Any:
    origin = typing.get_origin(target)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(target) if a is not type(None)]
        if raw == "" or raw.lower() == "null":
            return None
        target = args[0]
    try:
        if target is bool:
            low = raw.strip().lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
            raise ValueError(raw)
        if target is int:
            return int(raw.strip())
        if target is float:
            return float(raw.strip())
        if isinstance(target, type) and issubclass(target, str):
            return target(raw.strip())
    except ValueError as exc:
        raise ConfigError(f"config key {key!r}: cannot read {raw!r} as {getattr(target, '__name__', target)}") from exc
    return raw


def build_config(cls: type[T], values: Mapping[str, Any], *, strict: bool = False) -> T:
    """Build dataclass ``cls`` from string (or already typed) values keyed by field name.

    Unknown keys are ignored unless ``strict``: RocketMQ files carry keys for other components.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in names:
            if strict:
                raise ConfigError(f"unknown config key {key!r}")
            continue
        kwargs[key] = _convert(key, value, hints[key]) if isinstance(value, str) else value
    return cls(**kwargs)


def startup_error(exc: BaseException) -> str:
    """A start-up failure as one line: what failed and on which file or address (no traceback)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"cannot open {exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__


SECRET_KEY_MARKERS = ("credentials", "secret", "password")  # config keys whose values are never shown
MASKED = "******"


def config_strings(*configs: Any) -> dict[str, str]:
    """Every field of the config dataclasses as ``key -> text`` (getBrokerConfig/getNamesrvConfig); secrets masked."""
    out: dict[str, str] = {}
    for config in configs:
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            text = str(value.value if isinstance(value, enum.Enum) else value)
            if text and any(marker in f.name.lower() for marker in SECRET_KEY_MARKERS):
                text = MASKED
            out[f.name] = "true" if value is True else "false" if value is False else text
    return out


def apply_runtime_updates(config: Any, updates: Mapping[str, str], live_keys: frozenset[str]) -> None:
    """Set ``updates`` on ``config`` in place, converting each value as a config file's would be.

    Only ``live_keys`` (read where used, not copied at start) may change; anything else raises ConfigError naming
    the key, and nothing is changed unless every update is valid.
    """
    names = {f.name for f in dataclasses.fields(config)}
    hints = typing.get_type_hints(type(config))
    converted: dict[str, Any] = {}
    for key, raw in updates.items():
        if key not in names:
            raise ConfigError(f"unknown config key {key!r}")
        if key not in live_keys:
            raise ConfigError(
                f"{key} is read at start only: set it in the config file and restart "
                f"(changeable at runtime: {', '.join(sorted(live_keys))})"
            )
        value = _convert(key, raw, hints[key])
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ConfigError(f"config key {key!r}: must be >= 0, got {raw!r}")
        converted[key] = value
    for key, value in converted.items():
        setattr(config, key, value)
