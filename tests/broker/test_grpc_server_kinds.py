"""Both servers of the broker's gRPC port (``grpcServer``, docs/broker.md) give the same v2 send, receive and ack;
an unknown server is refused at load, by the key's name."""

from __future__ import annotations

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from broker.config import load_broker_settings
from orbitmq.config import ConfigError
from tests.broker.v2client import message, raw_client

Code = definition_pb2.Code
METADATA = (("x-mq-client-id", "server-kinds-client"), ("x-mq-language", "PYTHON"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["h2", "grpcio"])
def test_send_receive_ack_on_either_server(broker_factory, kind: str) -> None:
    broker = broker_factory.broker(options={"grpcServer": kind, "defaultTopicQueueNums": "1"})
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        sent = [message("KindsT", f"m{i}".encode()) for i in range(40)]
        assert c.send(*sent).status.code == Code.OK
        req = service_pb2.ReceiveMessageRequest(
            group=definition_pb2.Resource(name="KindsG"),
            message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name="KindsT"), id=-1),
            batch_size=32,
        )
        req.invisible_duration.FromMilliseconds(30_000)
        req.long_polling_timeout.FromMilliseconds(0)
        v2 = service_pb2_grpc.MessagingServiceStub(ch)
        responses = list(v2.ReceiveMessage(req, metadata=METADATA, timeout=10))
        kinds = [r.WhichOneof("content") for r in responses]
        # status first, then the messages, then the delivery timestamp (protocol-v2 §7.1)
        assert kinds == ["status"] + ["message"] * 32 + ["delivery_timestamp"], kinds
        got = [r.message for r in responses[1:-1]]
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(32)]
        entries = [
            service_pb2.AckMessageEntry(
                message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
            )
            for m in got
        ]
        ack = v2.AckMessage(
            service_pb2.AckMessageRequest(group=req.group, topic=req.message_queue.topic, entries=entries),
            metadata=METADATA,
            timeout=10,
        )
        assert ack.status.code == Code.OK, ack.status


def test_an_unknown_server_kind_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="grpcServer"):
        load_broker_settings(None, {"grpcServer": "twisted"})
