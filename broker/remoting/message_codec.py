"""Stored messages in RocketMQ's ``MessageDecoder`` layout (magic ``0xDAA320A7``, 1-byte topic length), the body of a
remoting pull response, and ``properties`` strings (``name\\x01value\\x02``) both ways."""

from __future__ import annotations

import socket
import struct

from broker.store.message import MessageExt
from orbitmq.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, encode_properties

MESSAGE_MAGIC_CODE = -626843481  # RocketMQ 4's MESSAGE_MAGIC_CODE (V1: IPv4 hosts)
_HEAD = struct.Struct(">iiIiiqqiq4si q4si iqi")  # the body CRC is unsigned here, the same 4 bytes as Java's int


def _ip(host: str) -> bytes:
    try:
        return socket.inet_aton(host)
    except OSError:
        return b"\0\0\0\0"


def encode_message(m: MessageExt) -> bytes:
    topic = m.topic.encode()
    props = encode_properties(m.properties)
    head = _HEAD.pack(
        0,  # total size, patched below
        MESSAGE_MAGIC_CODE,
        m.body_crc,
        m.queue_id,
        m.flag,
        m.queue_offset,
        m.commitlog_offset,
        m.sys_flag,
        m.born_timestamp,
        _ip(m.born_host[0]),
        m.born_host[1],
        m.store_timestamp,
        _ip(m.store_host[0]),
        m.store_host[1],
        m.reconsume_times,
        m.prepared_transaction_offset,
        len(m.body),
    )
    record = head + m.body + struct.pack(">b", len(topic)) + topic + struct.pack(">h", len(props)) + props
    return struct.pack(">i", len(record)) + record[4:]


def decode_properties_string(text: str) -> dict[str, str]:
    """RocketMQ's ``MessageDecoder.string2messageProperties``: lenient, as the Java decoder is."""
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            out[name] = value
    return out
