"""RemotingCommand frames: JSON and RocketMQ's binary header both ways, byte fixtures as RocketMQ writes them, and the
refusals (lengths, serialize types, headers that do not parse)."""

from __future__ import annotations

import json
import struct

import pytest

from orbitmq.limits import MAX_REMOTING_FRAME_BYTES
from orbitmq.remoting.codec import FrameError, RemotingCommand, check_length, decode, encode, iter_frames
from orbitmq.remoting.codes import RPC_TYPE_RESPONSE, SerializeType

# RocketMQ's RemotingCommand.encodeHeader for code 105 (GET_ROUTEINFO_BY_TOPIC), JAVA, version 453, opaque 7, no
# remark, extFields {"topic": "T"}: code, language, version, opaque, flag, remark length, ext length, key, value
BINARY_FIXTURE = (
    bytes.fromhex("0069" "00" "01c5" "00000007" "00000000" "00000000" "0000000c")
    + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 1) + b"T"
)  # fmt: skip


def test_json_frame_round_trip_as_rocketmq_reads_it() -> None:
    cmd = RemotingCommand(310, opaque=42, ext_fields={"b": "T", "e": "3"}, body=b"hello")
    frame = encode(cmd)
    (total, mark) = struct.unpack_from(">ii", frame, 0)
    assert total == len(frame) - 4 and mark >> 24 == 0, "JSON serialize type in the high byte"
    header = json.loads(frame[8 : 8 + (mark & 0xFFFFFF)])
    assert header["code"] == 310 and header["opaque"] == 42 and header["extFields"] == {"b": "T", "e": "3"}
    back = decode(frame[4:])
    assert (back.code, back.opaque, back.ext_fields, back.body) == (310, 42, {"b": "T", "e": "3"}, b"hello")


def test_binary_header_fixture_and_round_trip() -> None:
    frame = struct.pack(">i", (1 << 24) | len(BINARY_FIXTURE)) + BINARY_FIXTURE + b"body"
    cmd = decode(frame)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque) == (105, "JAVA", 453, 7)
    assert cmd.ext_fields == {"topic": "T"} and cmd.body == b"body" and cmd.serialize_type is SerializeType.ROCKETMQ
    answer = cmd.response(0, None, queueId=3)
    again = decode(encode(answer)[4:])
    assert again.serialize_type is SerializeType.ROCKETMQ, "answered in the request's serialization"
    assert again.flag & RPC_TYPE_RESPONSE and again.opaque == 7 and again.ext_fields == {"queueId": "3"}


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"\x00\x00", "shorter than its header-length field"),
        (struct.pack(">i", 100) + b"{}", "header length 100 exceeds"),
        (struct.pack(">i", (5 << 24) | 2) + b"{}", "serialize type 5"),
        (struct.pack(">i", 9) + b"not json!", "JSON header does not parse"),
        (struct.pack(">i", 2) + b"{}", "JSON header does not parse"),  # no code
        (struct.pack(">i", (1 << 24) | 3) + b"\x00\x01\x00", "binary header does not parse"),
    ],
)
def test_malformed_frames_are_refused_naming_the_part(frame: bytes, reason: str) -> None:
    with pytest.raises(FrameError, match=reason):
        decode(frame)


def test_frame_length_limits() -> None:
    check_length(4)
    with pytest.raises(FrameError, match="below the 4 bytes"):
        check_length(3)
    with pytest.raises(FrameError, match=f"exceeds the limit of {MAX_REMOTING_FRAME_BYTES} bytes"):
        check_length(MAX_REMOTING_FRAME_BYTES + 1)


def test_frames_are_cut_from_reads_however_they_split() -> None:
    """What a connection reads goes through ``iter_frames``: several frames in one read, a frame (its length field
    too) split across reads at any byte, the rest of a frame kept for the next read."""
    cmds = [
        RemotingCommand(9100, 1, ext_fields={"rpc": "/a.A/B"}, body=b"x" * 300, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(11, 2, remark="r", ext_fields={"topic": "T"}),
        RemotingCommand(9100, 3, body=b"", serialize_type=SerializeType.ROCKETMQ),
    ]
    stream = b"".join(encode(c) for c in cmds)
    pending = bytearray()
    assert [c.opaque for c in iter_frames(pending, stream)] == [1, 2, 3] and not pending
    for cut in range(1, len(stream)):
        for cut2 in (cut, min(len(stream), cut + 7), len(stream)):
            pending = bytearray()
            got = list(iter_frames(pending, stream[:cut]))
            got += iter_frames(pending, stream[cut:cut2])
            got += iter_frames(pending, stream[cut2:])
            assert got == cmds, (cut, cut2)
            assert not pending
    pending = bytearray()
    assert list(iter_frames(pending, stream[:-1])) == cmds[:2] and pending == stream[-len(encode(cmds[2])) : -1]
    with pytest.raises(FrameError, match="below the 4 bytes"):
        list(iter_frames(bytearray(), struct.pack(">i", 2) + b"ab"))
    with pytest.raises(FrameError, match="header length"):
        list(iter_frames(bytearray(), encode(cmds[1]) + struct.pack(">i", 12) + b"\x07" * 12))


def test_missing_and_malformed_header_fields_name_the_field() -> None:
    cmd = RemotingCommand(11, ext_fields={"queueId": "x"})
    with pytest.raises(FrameError, match="header field 'topic' is missing"):
        cmd.field("topic")
    with pytest.raises(FrameError, match="header field 'queueId' is not a number"):
        cmd.int_field("queueId")
    assert cmd.int_field("maxMsgNums", 32) == 32


def test_json_ext_fields_read_as_java_strings() -> None:
    """ali-ons sends some header fields unquoted (booleans, numbers); RocketMQ reads them as Strings, and signatures
    cover that spelling."""
    header = json.dumps({"code": 310, "extFields": {"k": False, "m": True, "e": 3, "n": None}}).encode()
    cmd = decode(struct.pack(">i", len(header)) + header)
    assert cmd.ext_fields == {"k": "false", "m": "true", "e": "3", "n": ""}


def test_frames_cut_from_a_pending_buffer_own_their_bodies_and_leave_it_resizable() -> None:
    """Frames are decoded from a view of the read buffer (no frame-sized copies but the body): the body is a
    ``bytes`` of its own, and a caller that stops after the first frame can still resize the buffer."""
    cmds = [RemotingCommand(9100, i, body=bytes([i]) * 70_000, serialize_type=SerializeType.ROCKETMQ) for i in (1, 2)]
    stream = b"".join(encode(c) for c in cmds)
    pending = bytearray(stream[:100])
    frames = iter_frames(pending, stream[100:])
    first = next(frames)
    assert type(first.body) is bytes and first == cmds[0]
    frames.close()
    pending += b"more"  # no view of it is left behind (a BufferError otherwise)
    assert decode(memoryview(encode(cmds[1]))[4:]) == decode(encode(cmds[1])[4:]) == cmds[1]
