"""Message ids: RocketMQ's offset message id (store host + commitlog offset) encode/decode.

The 32 upper-case hex characters are IPv4 (4 bytes), port (4 bytes) and commitlog offset (8 bytes).
"""

from __future__ import annotations

import re
import socket
import struct
from dataclasses import dataclass

from orbitmq.errors import Code, MQError

_OFFSET_ID = struct.Struct(">4sIq")
OFFSET_MSG_ID_LENGTH = _OFFSET_ID.size * 2


@dataclass(frozen=True)
class OffsetMessageId:
    host: str
    port: int
    commitlog_offset: int


def create_offset_message_id(host: str, port: int, commitlog_offset: int) -> str:
    return _OFFSET_ID.pack(socket.inet_aton(host), port, commitlog_offset).hex().upper()


def decode_offset_message_id(msg_id: str) -> OffsetMessageId:
    """Decode an offset message id; a malformed one is ILLEGAL_MESSAGE_ID naming the expected length."""
    if len(msg_id) != OFFSET_MSG_ID_LENGTH:
        raise MQError(Code.ILLEGAL_MESSAGE_ID, f"offset message id must be {OFFSET_MSG_ID_LENGTH} hex characters")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MQError(Code.ILLEGAL_MESSAGE_ID, "offset message id must be hexadecimal") from exc
    ip, port, offset = _OFFSET_ID.unpack(raw)
    return OffsetMessageId(socket.inet_ntoa(ip), port, offset)


_HEX = re.compile(r"[0-9A-Fa-f]+")


def is_hex_id(msg_id: str) -> bool:
    """Offset ids and unique ids (v4 UNIQ_KEY, v5 message ids) are all hexadecimal strings."""
    return _HEX.fullmatch(msg_id) is not None
