"""Plain rows for the batched produce path: ``send_columns``' column lists, ``send_batch``'s plain messages.

Validation is the same as ``to_wire``'s, row by row, but no header map is built per row: the rows go straight
into ``PlainRun`` requests (``Produce/SendBatch``'s form), the v2 protobuf only if a broker needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat

from oms.convert import MAPPED_HEADERS
from oms.errors import OMSMessageFormatException, from_mq_error
from oms.keys import BuiltinKeys, NonStandardKeys
from oms.message import BytesMessage, message_columns, stamp_message_ids
from oms.producer.plain_run import ColumnRefusal, PlainRun, PlainRunBuilder, PropertyColumns
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES
from orbitmq.validation import validate_tag

Keys = str | Sequence[str] | None


def _key_list(keys: Keys) -> list[str]:
    if not keys:
        return []
    if isinstance(keys, str):
        return keys.split()  # RocketMQ's stored form: space-separated
    return [k for k in keys if k]


def plain_column_runs(
    topic: str,
    bodies: Sequence[bytes],
    tags: Sequence[str | None] | None,
    keys: Sequence[Keys] | None,
    properties: Sequence[Mapping[str, str] | None] | None,
    *,
    property_columns: Mapping[str, Sequence[str | None]] | None = None,
    born_host: str,
    max_message_size: int,
    compress_over: int,
) -> list[PlainRun] | None:
    """The rows as plain (normal, uncompressed) runs of at most one request each, or None when a row's body is
    over the compression threshold (that call takes the message path). Raises ``OMSMessageFormatException``
    naming the row (or the property column)."""
    n = len(bodies)
    for name, column in (("tags", tags), ("keys", keys), ("properties", properties)):
        if column is not None and len(column) != n:
            raise ValueError(f"{name} has {len(column)} rows, bodies has {n}")
    if not n or 0 < compress_over < max(map(len, bodies)):
        return None if n else []
    builder = _builder(born_host, max_message_size)
    key_lists = [_key_list(k) for k in keys] if keys is not None else None
    try:
        columns = PropertyColumns(property_columns, n) if property_columns else None
        return builder.runs(topic, bodies, tags, key_lists, properties, columns=columns)
    except ColumnRefusal as refused:
        where = f"row {refused.row}" if refused.row is not None else "property_columns"
        raise from_mq_error(MQError(refused.error.code, f"{where}: {refused.error.message}")) from None
    except MQError as exc:
        raise from_mq_error(MQError(exc.code, f"row {builder.failed_row}: {exc.message}")) from None


# What a message may carry to be sent as a plain row: a topic, a tag, keys (an id it had is replaced, as to_wire
# replaces it) and user headers that to_wire passes on as properties; anything else (delays, groups, unsupported
# headers, user headers to_wire would read as a tag or keys...) takes to_wire.
_PLAIN_SYS_HEADERS = frozenset(
    {BuiltinKeys.DESTINATION, BuiltinKeys.MESSAGE_ID, NonStandardKeys.TAGS, BuiltinKeys.SEARCH_KEYS}
)


def plain_message_runs(
    messages: Sequence[BytesMessage], *, born_host: str, max_message_size: int, compress_over: int
) -> list[PlainRun] | None:
    """``to_wire`` for a batch of plain messages (see ``_PLAIN_SYS_HEADERS``) without its per-header work: runs
    per topic (first-seen order; ``positions`` say where each row was), or None when one of them is not plain or
    needs compression (the batch then takes ``to_wire``, message by message).

    Gives each message its id, as ``to_wire`` does; raises what ``to_wire`` raises. The headers are read column
    by column in C (``message_columns``): a Python loop over the messages cost a third of the send."""
    columns = message_columns(messages)
    if columns is None or not messages:
        return None
    sys_maps, user_maps, bodies = columns.sys_maps, columns.user_maps, columns.bodies
    has_user = any(user_maps)
    # every header name of the batch gathered in one C call each (a check per message cost 0.06 us a message)
    sys_names = set().union(*sys_maps)
    if (
        not sys_names <= _PLAIN_SYS_HEADERS
        or (has_user and not MAPPED_HEADERS.isdisjoint(chain.from_iterable(user_maps)))
        or 0 < compress_over < max(map(len, bodies))
    ):
        return None
    destination, keys_key, tags_key = BuiltinKeys.DESTINATION, BuiltinKeys.SEARCH_KEYS, NonStandardKeys.TAGS
    topics: list[str | None] = list(map(dict.get, sys_maps, repeat(destination)))
    # a header no message has needs no pass over the messages
    tags: list[str | None] = list(map(dict.get, sys_maps, repeat(tags_key))) if tags_key in sys_names else []
    keys: list[list[str] | None] | None = None
    if keys_key in sys_names:  # only messages with keys pay for ``m.keys``
        keys = [m.keys if keys_key in h else None for m, h in zip(messages, sys_maps, strict=True)]
    users = user_maps if has_user else None  # an empty map is a row without user properties
    builder = _builder(born_host, max_message_size)
    try:
        if not all(topics):
            raise OMSMessageFormatException(Code.ILLEGAL_TOPIC, f"the message has no {destination} (topic)")
        if "" in tags:
            validate_tag("")  # to_wire refuses a blank tag where a column leaves it out
        first = topics[0]
        assert first is not None
        if topics.count(first) == len(topics):  # the usual batch: one topic, one pass
            runs = builder.runs(first, bodies, tags if any(tags) else None, keys, users, messages)
            stamp_message_ids(sys_maps, list(chain.from_iterable(run.ids for run in runs)))
            return runs
        by_topic: dict[str, list[int]] = {}
        for position, topic in enumerate(topics):
            assert topic is not None
            by_topic.setdefault(topic, []).append(position)
        runs = []
        for topic, positions in by_topic.items():
            topic_runs = builder.runs(
                topic,
                [bodies[i] for i in positions],
                [tags[i] for i in positions] if tags else None,
                [keys[i] for i in positions] if keys is not None else None,
                [user_maps[i] for i in positions] if users is not None else None,
                [messages[i] for i in positions],
                positions,
            )
            for run in topic_runs:
                stamp_message_ids([sys_maps[p] for p in run.positions], run.ids)
            runs += topic_runs
    except MQError as exc:
        raise from_mq_error(exc) from None
    return runs


def _builder(born_host: str, max_message_size: int) -> PlainRunBuilder:
    return PlainRunBuilder(
        born_host=born_host,
        max_message_size=max_message_size,
        max_bytes=MAX_BATCH_SIZE,
        max_count=MAX_SEND_BATCH_MESSAGES,
    )


def column_messages(
    topic: str,
    bodies: Sequence[bytes],
    tags: Sequence[str | None] | None,
    keys: Sequence[Keys] | None,
    properties: Sequence[Mapping[str, str] | None] | None,
    property_columns: Mapping[str, Sequence[str | None]] | None = None,
) -> list[BytesMessage]:
    """The rows as messages, for the calls ``plain_column_runs`` leaves to ``send_batch``."""
    out = []
    for row, body in enumerate(bodies):
        user = dict(properties[row] or {}) if properties is not None else {}
        for name, values in (property_columns or {}).items():
            value = values[row]
            if value is not None:
                user[name] = value
        message = BytesMessage(body, topic, user_headers=user or None)
        tag = tags[row] if tags is not None else None
        if tag:
            message.tags = tag
        key_list = _key_list(keys[row]) if keys is not None else []
        if key_list:
            message.keys = key_list
        out.append(message)
    return out
