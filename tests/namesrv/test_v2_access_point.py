"""The name server as a v2 access point (real ``mqnamesrv``): every answer has a real status code."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s

from broker.registration import BrokerRegistrar
from orbitmq.limits import DEFAULT_MAX_DELIVERY_ATTEMPTS
from orbitmq.route import GroupPolicy, TopicConfig
from tests.namesrv.helpers import client_metadata, namesrv_process, v2_stub
from tests.v2.test_settings import consumer_settings, producer_settings

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]
OK = d.Code.OK


async def telemetry_exchange(addr: str, settings: d.Settings, client_id: str) -> s.TelemetryCommand:
    async with grpc.aio.insecure_channel(addr) as channel:
        call = v2_stub(channel).Telemetry(metadata=client_metadata(client_id))
        await call.write(s.TelemetryCommand(settings=settings))
        reply = await asyncio.wait_for(call.read(), 5)
        await call.done_writing()
        call.cancel()
    assert isinstance(reply, s.TelemetryCommand)
    return reply


def test_v2_rpcs_on_the_name_server(tmp_path: Path) -> None:
    async def scenario(addr: str) -> None:
        registrar = BrokerRegistrar(addr, "c", "broker-a", 0, "127.0.0.1:18082", lambda: [TopicConfig("t1")])
        await registrar.start()
        try:
            producer = await telemetry_exchange(addr, producer_settings("t1"), "h@1@0@p")
            assert producer.status.code == OK
            assert producer.settings.publishing.max_body_size == 4 * 1024 * 1024
            assert producer.settings.publishing.validate_message_type

            push = await telemetry_exchange(addr, consumer_settings(d.ClientType.PUSH_CONSUMER, "g", "t1"), "h@1@1@c")
            assert push.status.code == OK
            assert push.settings.subscription.long_polling_timeout.seconds == 20
            assert push.settings.backoff_policy.WhichOneof("strategy") == "customized_backoff"
            assert push.settings.subscription.fifo is False

            simple = await telemetry_exchange(
                addr, consumer_settings(d.ClientType.SIMPLE_CONSUMER, "g2", "t1", polling_s=15), "h@1@2@s"
            )
            assert simple.status.code == OK
            assert simple.settings.subscription.long_polling_timeout.seconds == 15

            with pytest.raises(grpc.aio.AioRpcError) as refused:  # as the Java proxy: the stream ends
                await telemetry_exchange(addr, d.Settings(client_type=d.ClientType.PUSH_CONSUMER), "h@1@3@x")
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

            async with grpc.aio.insecure_channel(addr) as channel:
                v2 = v2_stub(channel)
                md = client_metadata("h@1@1@c")
                hb = await v2.Heartbeat(
                    s.HeartbeatRequest(group=d.Resource(name="g"), client_type=d.ClientType.PUSH_CONSUMER), metadata=md
                )
                assert hb.status.code == OK
                no_id = await v2.Heartbeat(s.HeartbeatRequest(client_type=d.ClientType.PRODUCER))
                assert no_id.status.code == d.Code.CLIENT_ID_REQUIRED

                assignment = await v2.QueryAssignment(
                    s.QueryAssignmentRequest(topic=d.Resource(name="t1"), group=d.Resource(name="g")), metadata=md
                )
                assert assignment.status.code == OK
                assert [(a.message_queue.broker.name, a.message_queue.id) for a in assignment.assignments] == [
                    ("broker-a", -1)
                ]
                assert assignment.assignments[0].message_queue.broker.endpoints.addresses[0].port == 18082
                unknown = await v2.QueryAssignment(
                    s.QueryAssignmentRequest(topic=d.Resource(name="nope"), group=d.Resource(name="g")), metadata=md
                )
                assert unknown.status.code == d.Code.TOPIC_NOT_FOUND

                send = await v2.SendMessage(s.SendMessageRequest(), metadata=md)
                assert send.status.code == d.Code.BAD_REQUEST and "broker endpoint" in send.status.message
                received = [r async for r in v2.ReceiveMessage(s.ReceiveMessageRequest(), metadata=md)]
                assert [r.status.code for r in received] == [d.Code.BAD_REQUEST]
                nack = await v2.ChangeInvisibleDuration(
                    s.ChangeInvisibleDurationRequest(receipt_handle="rh-1"), metadata=md
                )
                assert nack.status.code == d.Code.BAD_REQUEST and nack.receipt_handle == "rh-1"
                for call, req in [
                    (v2.AckMessage, s.AckMessageRequest()),
                    (v2.EndTransaction, s.EndTransactionRequest()),
                    (v2.ForwardMessageToDeadLetterQueue, s.ForwardMessageToDeadLetterQueueRequest()),
                    (v2.UpdateOffset, s.UpdateOffsetRequest()),
                    (v2.GetOffset, s.GetOffsetRequest()),
                    (v2.QueryOffset, s.QueryOffsetRequest()),
                    (v2.SyncLiteSubscription, s.SyncLiteSubscriptionRequest()),
                ]:
                    resp = await call(req, metadata=md)
                    assert resp.status.code not in (0, OK), call
                # recall goes to the access point and is forwarded; the fake broker address is not listening
                recall = await v2.RecallMessage(
                    s.RecallMessageRequest(topic=d.Resource(name="t1"), recall_handle="x"), metadata=md
                )
                assert recall.status.code == d.Code.NOT_FOUND
                bye = await v2.NotifyClientTermination(
                    s.NotifyClientTerminationRequest(group=d.Resource(name="g")), metadata=md
                )
                assert bye.status.code == OK
        finally:
            await registrar.shutdown()

    with namesrv_process(tmp_path) as (_, addr):
        asyncio.run(scenario(addr))


def test_auto_create_route_for_unknown_topic(tmp_path: Path) -> None:
    async def scenario(addr: str) -> None:
        plain = BrokerRegistrar(addr, "c", "broker-plain", 0, "127.0.0.1:18083", lambda: [TopicConfig("t1")])
        auto = BrokerRegistrar(
            addr,
            "c",
            "broker-auto",
            0,
            "127.0.0.1:18084",
            lambda: [TopicConfig("t2")],
            auto_create_topic_enable=True,
            default_topic_queue_nums=2,
        )
        await plain.start()
        async with grpc.aio.insecure_channel(addr) as channel:
            v2 = v2_stub(channel)
            req = s.QueryRouteRequest(topic=d.Resource(name="brand-new"))
            before = await v2.QueryRoute(req, metadata=client_metadata())
            assert before.status.code == d.Code.TOPIC_NOT_FOUND
            await auto.start()
            after = await v2.QueryRoute(req, metadata=client_metadata())
            assert after.status.code == OK
            assert {(q.broker.name, q.id) for q in after.message_queues} == {("broker-auto", 0), ("broker-auto", 1)}
            assert d.MessageType.FIFO in after.message_queues[0].accept_message_types
        await auto.shutdown()
        await plain.shutdown()

    with namesrv_process(tmp_path) as (_, addr):
        asyncio.run(scenario(addr))


def test_group_policies_from_brokers_shape_consumer_settings_and_assignments(tmp_path: Path) -> None:
    # the official client latches fifo and the retry policy from its first settings reply, often the name server's
    groups = [GroupPolicy("g-fifo", fifo=True, max_delivery_attempts=4)]

    async def scenario(addr: str) -> None:
        registrar = BrokerRegistrar(
            addr,
            "c",
            "broker-a",
            0,
            "127.0.0.1:18085",
            lambda: [TopicConfig("t1", read_queue_nums=2, write_queue_nums=2)],
            group_policies=lambda: list(groups),
        )
        await registrar.start()
        try:
            fifo = await telemetry_exchange(
                addr, consumer_settings(d.ClientType.PUSH_CONSUMER, "g-fifo", "t1"), "h@2@1"
            )
            assert fifo.status.code == OK
            assert fifo.settings.subscription.fifo is True
            assert fifo.settings.backoff_policy.max_attempts == 4
            plain = await telemetry_exchange(
                addr, consumer_settings(d.ClientType.PUSH_CONSUMER, "g-new", "t1"), "h@2@2"
            )
            assert plain.settings.subscription.fifo is False
            assert plain.settings.backoff_policy.max_attempts == DEFAULT_MAX_DELIVERY_ATTEMPTS

            async with grpc.aio.insecure_channel(addr) as channel:
                v2 = v2_stub(channel)

                async def assigned(group: str) -> list[int]:
                    resp = await v2.QueryAssignment(
                        s.QueryAssignmentRequest(topic=d.Resource(name="t1"), group=d.Resource(name=group)),
                        metadata=client_metadata(),
                    )
                    assert resp.status.code == OK
                    return sorted(a.message_queue.id for a in resp.assignments)

                assert await assigned("g-fifo") == [0, 1]
                assert await assigned("g-new") == [-1]
                # a group turned FIFO on the broker reaches the name server with the next registration
                groups.append(GroupPolicy("g-new", fifo=True))
                await registrar.register_now()
                assert await assigned("g-new") == [0, 1]
        finally:
            await registrar.shutdown()
        # the broker left: nobody reports the group any more
        gone = await telemetry_exchange(addr, consumer_settings(d.ClientType.PUSH_CONSUMER, "g-fifo", "t1"), "h@2@3")
        assert gone.settings.subscription.fifo is False

    with namesrv_process(tmp_path) as (_, addr):
        asyncio.run(scenario(addr))
