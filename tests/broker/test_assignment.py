"""QueryAssignment: per broker (queue id -1) for normal groups, per queue for orderly groups, averaged over
the live clients of the group known from heartbeats; plus the pure allocation function."""

from __future__ import annotations

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK


def _meta(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


@pytest.mark.timeout(120)
def test_query_assignment_over_live_clients(broker):
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("AsgT")).status.code == OK
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        group = definition_pb2.Resource(name="AsgG")
        topic = definition_pb2.Resource(name="AsgT")
        for cid in ("client-1", "client-2"):
            hb = stub.Heartbeat(
                service_pb2.HeartbeatRequest(group=group, client_type=definition_pb2.SIMPLE_CONSUMER),
                metadata=_meta(cid),
                timeout=10,
            )
            assert hb.status.code == OK
        req = service_pb2.QueryAssignmentRequest(topic=topic, group=group)
        normal = stub.QueryAssignment(req, metadata=_meta("client-1"), timeout=10)
        assert normal.status.code == OK
        assert [a.message_queue.id for a in normal.assignments] == [-1]
        mq = normal.assignments[0].message_queue
        assert mq.broker.name == broker.name and mq.broker.endpoints.addresses[0].port == broker.port
        assert mq.permission == definition_pb2.READ_WRITE

        admin = admin_pb2_grpc.AdminStub(ch)
        cfg = admin_pb2.GroupConfig(group_name="AsgG", retry_max_times=16, consume_message_orderly=True)
        assert admin.CreateOrUpdateGroup(admin_pb2.CreateOrUpdateGroupRequest(config=cfg), timeout=10).status.code == OK
        ids = [
            [a.message_queue.id for a in stub.QueryAssignment(req, metadata=_meta(cid), timeout=10).assignments]
            for cid in ("client-1", "client-2")
        ]
        assert ids == [[0, 1], [2, 3]]

        missing = stub.QueryAssignment(
            service_pb2.QueryAssignmentRequest(topic=definition_pb2.Resource(name="NoSuchT"), group=group),
            metadata=_meta("client-1"),
            timeout=10,
        )
        assert missing.status.code == definition_pb2.Code.TOPIC_NOT_FOUND
        no_id = stub.Heartbeat(service_pb2.HeartbeatRequest(client_type=definition_pb2.PRODUCER), timeout=10)
        assert no_id.status.code == definition_pb2.Code.CLIENT_ID_REQUIRED
