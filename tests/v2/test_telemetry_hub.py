"""TelemetryHub inside an embedded NameServer (same event loop as the test, real gRPC on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s

from namesrv.config import NamesrvConfig
from namesrv.server import NameServer
from orbitmq.v2.telemetry import ClientEvent, ClientInfo
from tests.namesrv.helpers import client_metadata, v2_stub
from tests.v2.test_settings import consumer_settings, producer_settings
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


def run(coro_factory: Callable[[NameServer, str], Awaitable[None]]) -> None:
    async def main() -> None:
        server = NameServer(NamesrvConfig(listenPort=0, host="127.0.0.1", clientExpiredSeconds=0.5))
        port = await server.start()
        try:
            await coro_factory(server, f"127.0.0.1:{port}")
        finally:
            await server.stop()

    asyncio.run(main())


def test_send_command_reaches_stream_and_client_survives_stream_drop() -> None:
    async def scenario(server: NameServer, addr: str) -> None:
        hub = server.hub
        events: list[tuple[ClientEvent, str]] = []
        hub.on_client_change(lambda ev, c: events.append((ev, c.client_id)))
        async with grpc.aio.insecure_channel(addr) as channel:
            call = v2_stub(channel).Telemetry(metadata=client_metadata("p@1"))
            await call.write(s.TelemetryCommand(settings=producer_settings("t1")))
            first = await asyncio.wait_for(call.read(), 5)
            assert first.status.code == d.Code.OK
            info = hub.client("p@1")
            assert info is not None and info.is_producer and info.topics == frozenset({"t1"}) and info.connected
            assert [c.client_id for c in hub.clients(client_type=d.ClientType.PRODUCER)] == ["p@1"]
            assert hub.settings_of("p@1") is not None

            recover = s.TelemetryCommand(
                recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(transaction_id="tx-1")
            )
            assert hub.send_command("p@1", recover)
            pushed = await asyncio.wait_for(call.read(), 5)
            assert pushed.recover_orphaned_transaction_command.transaction_id == "tx-1"

            # from another thread: handed over to the loop
            other = s.TelemetryCommand(
                recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(transaction_id="tx-2")
            )
            results: list[bool] = []
            t = threading.Thread(target=lambda: results.append(hub.send_command("p@1", other)))
            t.start()
            t.join(5)
            assert results == [True]
            pushed2 = await asyncio.wait_for(call.read(), 5)
            assert pushed2.recover_orphaned_transaction_command.transaction_id == "tx-2"

            # topics change -> UPDATED
            await call.write(s.TelemetryCommand(settings=producer_settings("t1", "t2")))
            await asyncio.wait_for(call.read(), 5)
            call.cancel()

        async def disconnected() -> bool:
            c = hub.client("p@1")
            return c is not None and not c.connected

        await eventually(disconnected, 5, "stream drop noticed")
        assert hub.send_command("p@1", recover) is False  # no stream, but the client is still known (P12)
        assert hub.client("p@1") is not None
        # silent past clientExpiredSeconds and no stream: expired
        await eventually(lambda: asyncio.sleep(0, hub.client("p@1") is None), 5, "client expiry")
        assert events == [
            (ClientEvent.REGISTERED, "p@1"),
            (ClientEvent.UPDATED, "p@1"),
            (ClientEvent.EXPIRED, "p@1"),
        ]

    run(scenario)


def test_reader_never_blocks_on_an_unread_stream_and_termination_unregisters() -> None:
    async def scenario(server: NameServer, addr: str) -> None:
        hub = server.hub
        seen: list[ClientInfo] = []
        hub.on_client_change(lambda ev, c: seen.append(c) if ev == ClientEvent.UNREGISTERED else None)
        async with grpc.aio.insecure_channel(addr) as channel:
            v2 = v2_stub(channel)
            md = client_metadata("c@1")
            call = v2.Telemetry(metadata=md)
            # a push consumer whose reader died (P13): it writes settings and never reads the replies
            for i in range(800):
                await call.write(
                    s.TelemetryCommand(settings=consumer_settings(d.ClientType.PUSH_CONSUMER, "g", f"t{i}"))
                )

            async def last_applied() -> bool:
                c = hub.client("c@1")
                return c is not None and c.topics == frozenset({"t799"})

            await eventually(last_applied, 10, "all settings read")
            info = hub.client("c@1")
            assert info is not None and info.group == "g"
            assert [c.client_id for c in hub.clients(group="g")] == ["c@1"]
            bye = await v2.NotifyClientTermination(
                s.NotifyClientTerminationRequest(group=d.Resource(name="g")), metadata=md
            )
            assert bye.status.code == d.Code.OK
            assert hub.client("c@1") is None and [c.client_id for c in seen] == ["c@1"]
            call.cancel()

    run(scenario)


def test_heartbeat_before_settings_registers_the_client() -> None:
    async def scenario(server: NameServer, addr: str) -> None:
        async with grpc.aio.insecure_channel(addr) as channel:
            hb = await v2_stub(channel).Heartbeat(
                s.HeartbeatRequest(group=d.Resource(name="g"), client_type=d.ClientType.SIMPLE_CONSUMER),
                metadata=client_metadata("early@1"),
            )
        assert hb.status.code == d.Code.OK
        info = server.hub.client("early@1")
        assert info is not None and info.group == "g" and info.client_type == d.ClientType.SIMPLE_CONSUMER
        assert info.meta is not None and info.meta.language == "PYTHON"

    run(scenario)


def test_other_client_commands_reach_their_listeners() -> None:
    async def scenario(server: NameServer, addr: str) -> None:
        got: list[tuple[str, str]] = []
        server.hub.on_command(
            "verify_message_result", lambda c, cmd: got.append((c.client_id, cmd.verify_message_result.nonce))
        )
        async with grpc.aio.insecure_channel(addr) as channel:
            call = v2_stub(channel).Telemetry(metadata=client_metadata("v@1"))
            await call.write(s.TelemetryCommand(settings=producer_settings("t1")))
            await asyncio.wait_for(call.read(), 5)
            await call.write(s.TelemetryCommand(verify_message_result=s.VerifyMessageResult(nonce="n-1")))

            async def delivered() -> bool:
                return got == [("v@1", "n-1")]

            await eventually(delivered, 5, "verify_message_result listener")
            call.cancel()

    run(scenario)


def test_malformed_settings_end_the_stream_with_invalid_argument() -> None:
    no_pubsub = producer_settings("t1")
    no_pubsub.ClearField("publishing")
    cases = [
        ("n@1", no_pubsub, "no publishing or subscription"),
        ("n@2", producer_settings("bad topic!"), "bad topic!"),
        ("n@3", consumer_settings(d.ClientType.SIMPLE_CONSUMER, "", "t1"), "group name is blank"),
        ("n@4", consumer_settings(d.ClientType.PUSH_CONSUMER, "g\x01" * 152, "t1"), "limit"),
    ]

    async def scenario(server: NameServer, addr: str) -> None:
        async with grpc.aio.insecure_channel(addr) as channel:
            for client_id, settings, why in cases:
                call = v2_stub(channel).Telemetry(metadata=client_metadata(client_id))
                await call.write(s.TelemetryCommand(settings=settings))
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await asyncio.wait_for(call.read(), 5)
                assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, client_id
                assert why in (info.value.details() or ""), (client_id, info.value.details())
                assert server.hub.settings_of(client_id) is None  # nothing of it was recorded
            call = v2_stub(channel).Telemetry(metadata=client_metadata("ok@1"))  # others are unaffected
            await call.write(s.TelemetryCommand(settings=producer_settings("t1")))
            assert (await asyncio.wait_for(call.read(), 5)).status.code == d.Code.OK

    run(scenario)
