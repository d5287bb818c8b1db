"""The prototype gRPC-over-h2 floor server (benchmarks/h2_grpc.py) against grpcio's generated stub: what a real
gRPC client accepts, including a response far larger than the client's flow-control window."""

from __future__ import annotations

import pytest

from benchmarks.h2_grpc import frame, unframe_one
from benchmarks.v2_receive_floor_h2 import check_official_client, check_stub, floor_server


def test_grpc_framing_round_trips_and_refuses_what_it_does_not_serve() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x00\x03abc"
    assert unframe_one(frame(b"abc")) == b"abc"
    assert unframe_one(frame(b"")) == b""
    with pytest.raises(ValueError):
        unframe_one(frame(b"abc") + frame(b"d"))  # two messages in a unary request
    with pytest.raises(ValueError):
        unframe_one(frame(b"abc")[:-1])
    with pytest.raises(NotImplementedError):
        unframe_one(b"\x01" + frame(b"abc")[1:])  # compressed


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flavour", ["h2", "grpclib", "grpclib-batch"])
def test_grpcio_stub_receives_and_acks_from_the_floor_server(flavour: str) -> None:
    with floor_server(flavour, 3000) as server:
        assert check_stub(server.port, 3000)["ok"]


@pytest.mark.timeout(90)
def test_official_simple_consumer_receives_and_acks_from_the_h2_server() -> None:
    with floor_server("h2", 100) as server:
        assert check_official_client(server.port, 100) == {"ok": True, "received": 100, "acked": 100}
