"""A pull's records as columns (one list per field) for tabular readers: Arrow, pandas, Spark.

No message object is built and only the properties a column needs are looked up, so a row costs a fraction of
``decode_records`` + attribute reads (measured in ``benchmarks/bench_spark.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from oms.consumer.records import COMPRESSED_FLAG, HIDDEN_PROPERTIES, iter_frames, stored_body
from orbitmq import message_const as mc
from orbitmq.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

_UNIQ_KEY = f"{PROPERTY_SEPARATOR}{mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}{NAME_VALUE_SEPARATOR}"
_TAGS = f"{PROPERTY_SEPARATOR}{mc.PROPERTY_TAGS}{NAME_VALUE_SEPARATOR}"
_KEYS = f"{PROPERTY_SEPARATOR}{mc.PROPERTY_KEYS}{NAME_VALUE_SEPARATOR}"


@dataclass
class MessageColumns:
    """Row ``i`` of every list is one message, in queue order. ``keys`` holds each message's keys space-separated
    (RocketMQ's stored ``KEYS`` form, duplicates dropped), ``properties`` the user properties when asked for."""

    queue_offsets: list[int] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    tags: list[str | None] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    born_timestamps: list[int] = field(default_factory=list)
    store_timestamps: list[int] = field(default_factory=list)
    reconsume_times: list[int] = field(default_factory=list)
    properties: list[dict[str, str]] | None = None

    def __len__(self) -> int:
        return len(self.queue_offsets)

    def take(self, rows: list[int]) -> MessageColumns:
        """Only ``rows`` (ascending), e.g. those a client-side tag check kept."""
        picked: dict[str, Any] = {
            f.name: [getattr(self, f.name)[i] for i in rows] for f in fields(self) if f.name != "properties"
        }
        props = None if self.properties is None else [self.properties[i] for i in rows]
        return MessageColumns(**picked, properties=props)


def _value(props: str, needle: str) -> str | None:
    """The value of one property in ``props`` (prefixed with the separator, so a name is matched whole)."""
    at = props.find(needle)
    if at < 0:
        return None
    start = at + len(needle)
    stop = props.find(PROPERTY_SEPARATOR, start)
    return props[start:stop] if stop >= 0 else props[start:]


def normalised_keys(raw: str | None) -> str | None:
    """A record's stored ``KEYS`` value as the ``keys`` column holds it (space-separated, duplicates dropped)."""
    if not raw:
        return None
    if mc.KEY_SEPARATOR not in raw:
        return raw
    keys = dict.fromkeys(k for k in raw.split(mc.KEY_SEPARATOR) if k)
    return mc.KEY_SEPARATOR.join(keys) or None


def user_properties(props: str) -> dict[str, str]:
    """The user properties of a record's decoded property string (the broker's own are hidden, as on delivery)."""
    pairs = (item.partition(NAME_VALUE_SEPARATOR) for item in props.split(PROPERTY_SEPARATOR) if item)
    return {k: v for k, _, v in pairs if k and k not in HIDDEN_PROPERTIES}


def tag_of(raw_props: bytes) -> str | None:
    """A record's tag from its raw properties, as ``decode_columns`` gives it."""
    return _value(PROPERTY_SEPARATOR + raw_props.decode("utf-8"), _TAGS) or None


def decode_columns(raw: bytes, properties: bool = False) -> MessageColumns:
    """``Consume/PullBatch`` records as columns; message ids, tags and keys as ``decode_records`` gives them."""
    cols = MessageColumns(properties=[] if properties else None)
    offsets, ids, tags, keys = cols.queue_offsets, cols.message_ids, cols.tags, cols.keys
    bodies, born, stored, reconsumed = cols.bodies, cols.born_timestamps, cols.store_timestamps, cols.reconsume_times
    user = cols.properties
    for packed in iter_frames(raw):
        h = packed[0]
        props = PROPERTY_SEPARATOR + packed[3].decode("utf-8")
        offsets.append(h[5])
        ids.append(_value(props, _UNIQ_KEY) or str(h[6]))
        tags.append(_value(props, _TAGS) or None)
        keys.append(normalised_keys(_value(props, _KEYS)))
        bodies.append(stored_body(packed) if h[7] & COMPRESSED_FLAG else packed[2])
        born.append(h[8])
        stored.append(h[11])
        reconsumed.append(h[14])
        if user is not None:
            user.append(user_properties(props))
    return cols
