"""A SendBatch request serialized by hand (oms/client/batch_wire.py) is byte for byte protobuf's, and the direct
path writes it in pieces (oms/client/direct.py, send_pieces) as one stream whatever the kernel takes per write."""

from __future__ import annotations

import itertools
import socket
import threading
import time

import pytest

from oms.client.batch_wire import SendBatchWire, varint
from oms.client.direct import send_pieces
from orbitmq.proto import produce_pb2


@pytest.mark.parametrize(
    ("topic", "queue_id", "payload"),
    list(itertools.product(["T", "", "Tö" * 100], [-1, 0, 5, 2**31 - 1], [b"", b"x", b"z" * 70_000])),
)
def test_the_pieces_are_what_protobuf_serializes(topic: str, queue_id: int, payload: bytes) -> None:
    for count, born, group in itertools.product([0, 1, 2**20], [0, 1_764_316_800_000], ["", "log_appender"]):
        wire = SendBatchWire(topic, queue_id, payload, count, born, group)
        request = produce_pb2.SendBatchRequest(
            topic=topic,
            queue_id=queue_id,
            messages=payload,
            count=count,
            born_timestamp_ms=born,
            producer_group=group,
        )
        assert wire.SerializeToString() == request.SerializeToString()
        assert wire.to_pb() == request
        assert wire.pieces()[1] is payload  # the payload itself, not a copy


def test_varints_match_protobufs_for_edge_values() -> None:
    for value in (1, 127, 128, 300, 2**31 - 1, 2**63 - 1, -1, -(2**31)):  # 0 is left out, as protobuf does
        request = produce_pb2.SendBatchRequest(born_timestamp_ms=value)
        assert request.SerializeToString() == b"\x28" + varint(value)


def test_pieces_arrive_as_one_stream_through_partial_writes() -> None:
    left, right = socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # the kernel takes a little per sendmsg
    pieces = [b"head", b"", bytes(range(256)) * 4000, b"tail"]
    received = bytearray()

    def read() -> None:
        while len(received) < sum(map(len, pieces)):
            received.extend(right.recv(7000))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        send_pieces(left, pieces, time.monotonic() + 10)
        reader.join(10)
    finally:
        left.close()
        right.close()
    assert bytes(received) == b"".join(pieces)


def test_pieces_nobody_reads_time_out() -> None:
    left, right = socket.socketpair()
    try:
        with pytest.raises(TimeoutError):
            send_pieces(left, [b"x" * 10_000_000], time.monotonic() + 0.2)
    finally:
        left.close()
        right.close()
