"""Stored CommitLog records (from ``Consume/PullBatch``) as ``BytesMessage``s, headers mapped as on v2 delivery.

Compressed bodies (sys flag bit 0x1, zlib or gzip) come back as the producer sent them.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

from common import message_const as mc
from common.errors import Code
from common.record import RecordFormatError, RecordView, iter_records
from oms.errors import OMSRuntimeException
from oms.keys import BuiltinKeys, NonStandardKeys
from oms.message import BytesMessage

COMPRESSED_FLAG = 0x1
# Properties the broker keeps for itself; v2 delivery hides them from user properties too.
_HIDDEN = mc.SYSTEM_PROPERTY_KEYS | {mc.PROPERTY_DLQ_ORIGIN_TOPIC, mc.PROPERTY_DLQ_ORIGIN_MESSAGE_ID}


def decompress(body: bytes) -> bytes:
    """A compressed body: gzip when it has gzip's magic, else zlib (RocketMQ compresses with zlib)."""
    if body[:2] == b"\x1f\x8b":
        return gzip.decompress(body)
    return zlib.decompress(body)


def record_to_message(record: RecordView) -> BytesMessage:
    props = record.properties
    body = record.body
    if record.sys_flag & COMPRESSED_FLAG:
        try:
            body = decompress(body)
        except (OSError, zlib.error) as exc:
            raise OMSRuntimeException(
                Code.MESSAGE_CORRUPTED,
                f"message at {record.topic}:{record.queue_id}@{record.queue_offset} is flagged compressed but "
                f"does not decompress: {exc}",
            ) from exc
    message = BytesMessage(body, record.topic, user_headers={k: v for k, v in props.items() if k not in _HIDDEN})
    sys_h = message.sys_headers()
    sys_h[BuiltinKeys.MESSAGE_ID] = props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or f"{record.commitlog_offset}"
    tag = props.get(mc.PROPERTY_TAGS)
    if tag:
        sys_h[NonStandardKeys.TAGS] = tag
    keys = [k for k in props.get(mc.PROPERTY_KEYS, "").split(mc.KEY_SEPARATOR) if k]
    if keys:
        sys_h[BuiltinKeys.SEARCH_KEYS] = ",".join(keys)
    group = props.get(mc.PROPERTY_MESSAGE_GROUP)
    if group:
        sys_h[BuiltinKeys.STREAM_KEY] = group
    deliver = props.get(mc.PROPERTY_TIMER_DELIVER_MS)
    if deliver and deliver.isdigit():
        sys_h[BuiltinKeys.START_TIME] = deliver
    sys_h[BuiltinKeys.BORN_TIMESTAMP] = record.born_timestamp
    sys_h[BuiltinKeys.BORN_HOST] = record.born_host[0]
    sys_h[BuiltinKeys.STORE_TIMESTAMP] = record.store_timestamp
    sys_h[BuiltinKeys.STORE_HOST] = f"{record.store_host[0]}:{record.store_host[1]}"
    sys_h[BuiltinKeys.QUEUE_ID] = record.queue_id
    sys_h[BuiltinKeys.QUEUE_OFFSET] = record.queue_offset
    sys_h[BuiltinKeys.REDELIVERED_NUMBER] = record.reconsume_times
    return message


def decode_records(raw: bytes) -> Iterator[BytesMessage]:
    try:
        for record in iter_records(raw):
            yield record_to_message(record)
    except RecordFormatError as exc:
        raise OMSRuntimeException(Code.MESSAGE_CORRUPTED, f"PullBatch records do not decode: {exc}") from exc
