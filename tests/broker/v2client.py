"""A raw v2 gRPC client for broker tests: build messages, send, pull, offsets (no official-client pre-checks)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

METADATA = (("x-mq-client-id", "test@1@0@raw"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))


def message(
    topic: str,
    body: bytes = b"hello",
    *,
    tag: str | None = None,
    keys: list[str] | None = None,
    props: dict[str, str] | None = None,
    message_id: str | None = None,
    group: str | None = None,
) -> definition_pb2.Message:
    sp = definition_pb2.SystemProperties(
        message_id=uuid.uuid4().hex.upper() if message_id is None else message_id,
        body_encoding=definition_pb2.IDENTITY,
        message_type=definition_pb2.FIFO if group else definition_pb2.NORMAL,
    )
    sp.born_timestamp.GetCurrentTime()
    if tag is not None:
        sp.tag = tag
    if keys:
        sp.keys.extend(keys)
    if group is not None:
        sp.message_group = group
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic), body=body, user_properties=props or {}, system_properties=sp
    )


@dataclass
class PullResult:
    status: definition_pb2.Status = field(default_factory=definition_pb2.Status)
    statuses: int = 0
    messages: list[definition_pb2.Message] = field(default_factory=list)
    next_offset: int | None = None


class RawClient:
    def __init__(self, addr: str) -> None:
        self.channel = grpc.insecure_channel(
            addr, options=[("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
        )
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def send(self, *msgs: definition_pb2.Message, timeout: float = 10) -> service_pb2.SendMessageResponse:
        return self.stub.SendMessage(
            service_pb2.SendMessageRequest(messages=list(msgs)), metadata=METADATA, timeout=timeout
        )

    def route(self, topic: str) -> service_pb2.QueryRouteResponse:
        ep = definition_pb2.Endpoints(scheme=definition_pb2.IPv4)
        return self.stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic), endpoints=ep),
            metadata=METADATA,
            timeout=10,
        )

    @staticmethod
    def queue(topic: str, qid: int) -> definition_pb2.MessageQueue:
        return definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=qid)

    def pull(
        self,
        group: str,
        topic: str,
        qid: int,
        offset: int,
        batch: int = 32,
        polling_s: float = 0.0,
        tag_expr: str | None = None,
        timeout: float = 30,
        sql_expr: str | None = None,
        metadata: tuple[tuple[str, str], ...] = METADATA,
    ) -> PullResult:
        req = service_pb2.PullMessageRequest(
            group=definition_pb2.Resource(name=group),
            message_queue=self.queue(topic, qid),
            offset=offset,
            batch_size=batch,
        )
        if polling_s:
            req.long_polling_timeout.CopyFrom(
                duration_pb2.Duration(seconds=int(polling_s), nanos=int(polling_s % 1 * 1e9))
            )
        if tag_expr is not None:
            req.filter_expression.CopyFrom(
                definition_pb2.FilterExpression(type=definition_pb2.TAG, expression=tag_expr)
            )
        if sql_expr is not None:
            req.filter_expression.CopyFrom(
                definition_pb2.FilterExpression(type=definition_pb2.SQL, expression=sql_expr)
            )
        result = PullResult()
        for resp in self.stub.PullMessage(req, metadata=metadata, timeout=timeout):
            kind = resp.WhichOneof("content")
            if kind == "status":
                result.statuses += 1
                result.status = resp.status
            elif kind == "message":
                result.messages.append(resp.message)
            elif kind == "next_offset":
                result.next_offset = resp.next_offset
        assert result.statuses == 1, f"expected exactly one status, got {result.statuses}"
        return result

    def update_offset(self, group: str, topic: str, qid: int, offset: int) -> definition_pb2.Status:
        req = service_pb2.UpdateOffsetRequest(
            group=definition_pb2.Resource(name=group), message_queue=self.queue(topic, qid), offset=offset
        )
        return self.stub.UpdateOffset(req, metadata=METADATA, timeout=10).status

    def get_offset(self, group: str, topic: str, qid: int) -> service_pb2.GetOffsetResponse:
        req = service_pb2.GetOffsetRequest(
            group=definition_pb2.Resource(name=group), message_queue=self.queue(topic, qid)
        )
        return self.stub.GetOffset(req, metadata=METADATA, timeout=10)

    def query_offset(
        self, topic: str, qid: int, policy: int, timestamp_ms: int | None = None
    ) -> service_pb2.QueryOffsetResponse:
        req = service_pb2.QueryOffsetRequest(message_queue=self.queue(topic, qid), query_offset_policy=policy)
        if timestamp_ms is not None:
            req.timestamp.FromMilliseconds(timestamp_ms)
        return self.stub.QueryOffset(req, metadata=METADATA, timeout=10)


@contextmanager
def raw_client(addr: str) -> Iterator[RawClient]:
    client = RawClient(addr)
    try:
        yield client
    finally:
        client.close()
