"""What the v2 receive protocol itself costs in Python gRPC here: a server that answers ReceiveMessage (status, the
batch of prebuilt messages, delivery timestamp) and AckMessage with no broker work behind them.

Run as a process (``python -m benchmarks.v2_receive_floor TOTAL``): it prints its port, then serves until killed.
The bench drains it with the same client as the broker, so broker / floor is the broker's own share.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import grpc
from google.protobuf import timestamp_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from broker.grpc.convert import to_v2_message
from broker.store import codec
from broker.store.message import MessageExtBrokerInner
from orbitmq import message_const as mc

BODY_SIZE = 100


def delivered_message() -> service_pb2.ReceiveMessageResponse:
    """A response like the broker's for one 100-byte message with a tag, a key and an id (same fields, same size)."""
    now = int(time.time() * 1000)
    inner = MessageExtBrokerInner(
        topic="BenchFloorT",
        body=b"x" * BODY_SIZE,
        queue_id=1,
        properties={
            mc.PROPERTY_TAGS: "t",
            mc.PROPERTY_KEYS: "k1",
            mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "0A0B0C0D0E0F00112233445566778899AABB",
        },
        sys_flag=0,
        born_timestamp=now,
        born_host=("127.0.0.1", 50000),
        store_host=("127.0.0.1", 10911),
    )
    stored = codec.decode(codec.encode(inner, 123_456, 1_000_000, now))
    response = service_pb2.ReceiveMessageResponse()
    # a receipt handle as long as the broker's for this group and topic
    to_v2_message(stored, receipt_handle="h" * 120, invisible_duration_s=60.0, into=response.message)
    return response


def ack_response(request: service_pb2.AckMessageRequest) -> service_pb2.AckMessageResponse:
    """Every entry acknowledged, unchecked."""
    ok = definition_pb2.Status(code=definition_pb2.Code.OK)
    entries = [
        service_pb2.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok)
        for e in request.entries
    ]
    return service_pb2.AckMessageResponse(status=ok, entries=entries)


def delivery_stamp() -> service_pb2.ReceiveMessageResponse:
    """The response that ends a ReceiveMessage stream: when the batch was delivered."""
    stamp = timestamp_pb2.Timestamp()
    stamp.GetCurrentTime()
    return service_pb2.ReceiveMessageResponse(delivery_timestamp=stamp)


class FloorState:
    """What every floor server shares (this one and benchmarks.v2_receive_floor_h2's): the prebuilt message, the
    statuses, and how many messages are left to hand out."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.message = delivered_message()
        self.ok = service_pb2.ReceiveMessageResponse(status=definition_pb2.Status(code=definition_pb2.Code.OK))
        self.none = service_pb2.ReceiveMessageResponse(
            status=definition_pb2.Status(code=definition_pb2.Code.MESSAGE_NOT_FOUND)
        )

    def take(self, batch_size: int) -> int:
        n = min(batch_size, self.left)
        self.left -= n
        return n


class FloorServicer(FloorState, service_pb2_grpc.MessagingServiceServicer):
    """``total`` messages handed out in batches of the request's size; acks accepted unchecked."""

    async def ReceiveMessage(self, request: Any, context: Any) -> None:
        n = self.take(request.batch_size)
        await context.write(self.ok if n else self.none)
        for _ in range(n):
            await context.write(self.message)
        await context.write(delivery_stamp())

    async def AckMessage(self, request: Any, context: Any) -> Any:
        return ack_response(request)


async def serve(total: int) -> None:
    server = grpc.aio.server()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(FloorServicer(total), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
