"""Shared helpers of the name server tests: start real ``mqnamesrv`` processes, talk to them over gRPC."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import service_pb2_grpc

from orbitmq.proto import namesrv_pb2_grpc
from tests.procs import BIN, ServerProcess, free_port


@contextlib.contextmanager
def namesrv_process(tmp: Path, *extra: str, expire_s: float = 120.0) -> Iterator[tuple[ServerProcess, str]]:
    port = free_port()
    args = [str(BIN / "mqnamesrv"), "-p", str(port), "--host", "127.0.0.1", "--broker-expired-seconds", str(expire_s)]
    proc = ServerProcess([*args, *extra], tmp / f"namesrv-{port}.log").start()
    try:
        proc.wait_port(port, timeout=20)
        yield proc, f"127.0.0.1:{port}"
    finally:
        proc.stop()


def internal_stub(channel: grpc.aio.Channel) -> namesrv_pb2_grpc.NameServerStub:
    return namesrv_pb2_grpc.NameServerStub(channel)


def v2_stub(channel: grpc.aio.Channel) -> service_pb2_grpc.MessagingServiceStub:
    return service_pb2_grpc.MessagingServiceStub(channel)


def client_metadata(client_id: str = "test-host@1@0@abc") -> tuple[tuple[str, str], ...]:
    return (
        ("x-mq-client-id", client_id),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
        ("x-mq-client-version", "5.1.2"),
        ("x-mq-namespace", ""),
        ("x-mq-date-time", "20261122T120000Z"),
        ("authorization", "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00"),
    )
