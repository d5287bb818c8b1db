"""Bad input through a raw v2 stub: each gets its status code and a message naming the limit; nothing is stored."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import message, raw_client
from tests.namesrv.helpers import client_metadata

C = definition_pb2.Code
MIB = 1024 * 1024


def _stored_count(c, topic: str) -> int:
    policy = definition_pb2.QueryOffsetPolicy.END
    return sum(c.query_offset(topic, q, policy).offset for q in range(4))


def _delayed(topic: str, seconds: int) -> definition_pb2.Message:
    m = message(topic)
    m.system_properties.message_type = definition_pb2.DELAY
    m.system_properties.delivery_timestamp.seconds = seconds
    return m


def _recovering(topic: str, seconds: int) -> definition_pb2.Message:
    m = message(topic)
    m.system_properties.orphaned_transaction_recovery_duration.seconds = seconds
    return m


CASES = [
    ("illegal topic chars", lambda: message("bad topic!"), C.ILLEGAL_TOPIC, "must match"),
    ("topic too long", lambda: message("t" * 128), C.ILLEGAL_TOPIC, "limit is 127"),
    ("system topic", lambda: message("TBW102"), C.ILLEGAL_TOPIC, "system topic"),
    ("empty body", lambda: message("BadT", b""), C.MESSAGE_BODY_EMPTY, "empty"),
    ("body too large", lambda: message("BadT", b"x" * (4 * MIB + 1)), C.MESSAGE_BODY_TOO_LARGE, "4194304"),
    ("reserved property", lambda: message("BadT", props={"UNIQ_KEY": "x"}), C.ILLEGAL_MESSAGE_PROPERTY_KEY, "reserved"),
    ("control char property", lambda: message("BadT", props={"a": "b\x01"}), C.ILLEGAL_MESSAGE_PROPERTY_KEY, "control"),
    ("tag with bar", lambda: message("BadT", tag="a|b"), C.ILLEGAL_MESSAGE_TAG, "'|'"),
    ("blank tag", lambda: message("BadT", tag="  "), C.ILLEGAL_MESSAGE_TAG, "blank"),
    ("blank key", lambda: message("BadT", keys=["ok", " "]), C.ILLEGAL_MESSAGE_KEY, "blank"),
    (
        "too many properties",
        lambda: message("BadT", props={f"p{i}": "v" for i in range(129)}),
        C.MESSAGE_PROPERTIES_TOO_LARGE,
        "limit is 128",
    ),
    (
        "properties too large",
        lambda: message("BadT", props={"big": "v" * (17 * 1024)}),
        C.MESSAGE_PROPERTIES_TOO_LARGE,
        "16384",
    ),
    ("blank message id", lambda: message("BadT", message_id=""), C.ILLEGAL_MESSAGE_ID, "blank"),
    ("message group too long", lambda: message("BadT", group="g" * 64), C.ILLEGAL_MESSAGE_GROUP, "64"),
    ("delivery ms as seconds", lambda: _delayed("BadT", int(time.time() * 1000)), C.ILLEGAL_DELIVERY_TIME, "seconds"),
    ("delivery too far", lambda: _delayed("BadT", int(time.time()) + 3 * 86400), C.ILLEGAL_DELIVERY_TIME, "limit"),
    ("orphan recovery too long", lambda: _recovering("BadT", 7 * 86400), C.BAD_REQUEST, "limit is 3600s"),
    ("negative orphan recovery", lambda: _recovering("BadT", -5), C.BAD_REQUEST, "-5s"),
]


@pytest.mark.timeout(120)
def test_bad_input_gets_codes_and_nothing_is_stored(broker):
    with raw_client(broker.addr) as c:
        assert c.send(message("BadT", b"good-before")).status.code == C.OK
        before = _stored_count(c, "BadT")
        for name, build, code, fragment in CASES:
            resp = c.send(build())
            assert resp.status.code == code, f"{name}: {resp.status}"
            assert fragment in resp.status.message, f"{name}: {resp.status.message!r}"
            assert len(resp.entries) == 1 and resp.entries[0].status.code == code
        # batch: mixed topics, over 4 MiB in total, empty request
        resp = c.send(message("BadT"), message("OtherT"))
        assert resp.status.code == C.MESSAGE_CORRUPTED
        resp = c.send(*[message("BadT", b"x" * (MIB + 1)) for _ in range(4)])
        assert resp.status.code == C.MESSAGE_BODY_TOO_LARGE and "4194304" in resp.status.message
        assert c.send().status.code == C.MESSAGE_CORRUPTED
        # one bad message spoils the whole batch; the good ones are not stored either
        resp = c.send(message("BadT", b"ok"), message("BadT", b""))
        assert resp.status.code == C.MESSAGE_BODY_EMPTY
        assert _stored_count(c, "BadT") == before
        # the broker keeps serving
        ok = c.send(message("BadT", b"good-after"))
        assert ok.status.code == C.OK
        assert _stored_count(c, "BadT") == before + 1
        assert c.route("bad topic!").status.code == C.ILLEGAL_TOPIC


@pytest.mark.timeout(120)
def test_unknown_topic_with_auto_create_off(broker_factory):
    b = broker_factory.broker(options={"autoCreateTopicEnable": "false"})
    with raw_client(b.addr) as c:
        resp = c.send(message("NeverCreated"))
        assert resp.status.code == C.TOPIC_NOT_FOUND and "NeverCreated" in resp.status.message
        assert c.route("NeverCreated").status.code == C.TOPIC_NOT_FOUND


@pytest.mark.timeout(120)
def test_message_type_must_match_topic(broker):
    with raw_client(broker.addr) as c:
        assert c.send(message("NormalOnlyT")).status.code == C.OK
        resp = c.send(message("NormalOnlyT", group="g1"))
        assert resp.status.code == C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        # a FIFO topic (auto-created by a FIFO message) keeps a group on one queue
        offsets = [c.send(message("FifoT", f"{i}".encode(), group="order-1")) for i in range(5)]
        assert all(r.status.code == C.OK for r in offsets)
        assert [r.entries[0].offset for r in offsets] == [0, 1, 2, 3, 4]


GARBAGE = b"\xff\xff\xff not protobuf"
BROKER_METHODS = [
    ("unary", "/apache.rocketmq.v2.MessagingService/SendMessage", "apache.rocketmq.v2.SendMessageRequest"),
    ("unary", "/apache.rocketmq.v2.MessagingService/QueryRoute", "apache.rocketmq.v2.QueryRouteRequest"),
    ("server_stream", "/apache.rocketmq.v2.MessagingService/ReceiveMessage", "ReceiveMessageRequest"),
    ("bidi", "/apache.rocketmq.v2.MessagingService/Telemetry", "apache.rocketmq.v2.TelemetryCommand"),
    ("unary", "/orbitmq.produce.Produce/SendBatch", "orbitmq.produce.SendBatchRequest"),
    ("unary", "/orbitmq.consume.Consume/PullBatch", "orbitmq.consume.PullBatchRequest"),
    ("unary", "/orbitmq.admin.Admin/DeleteTopic", "orbitmq.admin.DeleteTopicRequest"),
]


def _call_garbage(channel: grpc.Channel, kind: str, method: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        if kind == "unary":
            channel.unary_unary(method)(GARBAGE, timeout=10)
        elif kind == "server_stream":
            list(channel.unary_stream(method)(GARBAGE, timeout=10))
        else:
            list(channel.stream_stream(method)(iter([GARBAGE]), timeout=10, metadata=[("x-mq-client-id", "c1")]))
    return info.value


@pytest.mark.timeout(60)
def test_undecodable_requests_get_invalid_argument_naming_the_method(broker_factory):
    ns = broker_factory.namesrv()
    broker = broker_factory.broker(ns)
    for addr, methods in (
        (broker.addr, BROKER_METHODS),
        (ns.addr, [*BROKER_METHODS[:2], ("unary", "/orbitmq.namesrv.NameServer/RegisterBroker", "RegisterBroker")]),
    ):
        with grpc.insecure_channel(addr) as channel:
            for kind, method, expected in methods:
                error = _call_garbage(channel, kind, method)
                assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, error.code(), error.details())
                details = error.details() or ""
                assert method in details and expected in details and "invalid protobuf" in details, details
                assert "Error" not in details and "class" not in details, details  # no Python internals
    with raw_client(broker.addr) as c:  # the server and other calls are unaffected
        assert c.send(message("AfterGarbage", b"ok")).status.code == C.OK


@pytest.mark.timeout(60)
def test_heartbeats_create_no_group_for_producers_and_refuse_malformed_groups(broker):
    with grpc.insecure_channel(broker.addr) as channel:
        v2 = service_pb2_grpc.MessagingServiceStub(channel)

        def heartbeat(kind: int, group: str) -> definition_pb2.Status:
            request = service_pb2.HeartbeatRequest(group=definition_pb2.Resource(name=group), client_type=kind)
            return v2.Heartbeat(request, metadata=client_metadata(), timeout=10).status

        def groups() -> set[str]:
            listed = admin_pb2_grpc.AdminStub(channel).ListGroups(admin_pb2.ListGroupsRequest(), timeout=10)
            return {g.group_name for g in listed.groups}

        before = groups()
        assert heartbeat(definition_pb2.ClientType.PRODUCER, "ProducerGroupOnly").code == C.OK
        assert heartbeat(definition_pb2.ClientType.PRODUCER, "").code == C.OK
        assert groups() == before  # a producer's heartbeat is no subscription group
        for bad in ("", "g\x07" * 152):
            refused = heartbeat(definition_pb2.ClientType.SIMPLE_CONSUMER, bad)
            assert refused.code == C.ILLEGAL_CONSUMER_GROUP, (bad, refused)
        assert heartbeat(definition_pb2.ClientType.PRODUCER, "bad group!").code == C.ILLEGAL_CONSUMER_GROUP
        assert groups() == before
