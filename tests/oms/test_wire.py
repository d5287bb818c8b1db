"""What the client puts on the wire, seen by an in-process stand-in server: headers, signing, Telemetry settings."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

import oms
import oms.convert
from orbitmq.errors import Code
from tests.procs import free_port
from tests.waiting import wait_until


class Recorder(service_pb2_grpc.MessagingServiceServicer):
    """Answers like a one-broker cluster and records each call's metadata and request."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.calls: list[tuple[str, dict[str, str], object]] = []
        self.lock = threading.Lock()

    def _record(self, method: str, context: grpc.ServicerContext, request: object) -> None:
        with self.lock:
            self.calls.append((method, dict(context.invocation_metadata()), request))

    def methods(self, name: str) -> list[tuple[dict[str, str], object]]:
        with self.lock:
            return [(md, req) for m, md, req in self.calls if m == name]

    def QueryRoute(self, request, context):
        self._record("QueryRoute", context, request)
        broker = definition_pb2.Broker(
            name="fake",
            id=0,
            endpoints=definition_pb2.Endpoints(
                scheme=definition_pb2.IPv4, addresses=[definition_pb2.Address(host="127.0.0.1", port=self.port)]
            ),
        )
        queues = [
            definition_pb2.MessageQueue(
                topic=request.topic, id=i, permission=definition_pb2.READ_WRITE, broker=broker,
                accept_message_types=[definition_pb2.NORMAL],
            )
            for i in range(2)
        ]  # fmt: skip
        return service_pb2.QueryRouteResponse(status=definition_pb2.Status(code=Code.OK), message_queues=queues)

    def SendMessage(self, request, context):
        self._record("SendMessage", context, request)
        entries = [
            service_pb2.SendResultEntry(
                status=definition_pb2.Status(code=Code.OK), message_id=m.system_properties.message_id, offset=7
            )
            for m in request.messages
        ]
        return service_pb2.SendMessageResponse(status=definition_pb2.Status(code=Code.OK), entries=entries)

    def Heartbeat(self, request, context):
        self._record("Heartbeat", context, request)
        return service_pb2.HeartbeatResponse(status=definition_pb2.Status(code=Code.OK))

    def NotifyClientTermination(self, request, context):
        self._record("NotifyClientTermination", context, request)
        return service_pb2.NotifyClientTerminationResponse(status=definition_pb2.Status(code=Code.OK))

    def Telemetry(self, request_iterator, context):
        self._record("Telemetry", context, None)
        for command in request_iterator:
            with self.lock:
                self.calls.append(("TelemetryCommand", {}, command))
            if command.HasField("settings"):
                yield service_pb2.TelemetryCommand(
                    status=definition_pb2.Status(code=Code.OK), settings=command.settings
                )


@pytest.fixture
def fake_server() -> Iterator[Recorder]:
    port = free_port()
    recorder = Recorder(port)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    service_pb2_grpc.add_MessagingServiceServicer_to_server(recorder, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield recorder
    finally:
        server.stop(0).wait(5)


@pytest.mark.timeout(30)
def test_every_call_carries_the_v2_headers(fake_server):
    url = f"oms:rocketmq://127.0.0.1:{fake_server.port}/ns1"
    with oms.get_messaging_access_point(url) as ap, ap.create_producer() as p1, ap.create_producer() as p2:
        p1.send(oms.BytesMessage(b"x", "T"))
        p2.send(oms.BytesMessage(b"y", "T"))
        wait_until(lambda: len(fake_server.methods("Telemetry")) >= 2)
    client_ids = set()
    request_ids = set()
    for method, md, _ in fake_server.calls:
        if method == "TelemetryCommand":
            continue
        assert md["x-mq-language"] == "PYTHON" and md["x-mq-protocol"] == "v2", method
        assert md["x-mq-namespace"] == "ns1" and md["x-mq-client-version"] == oms.CLIENT_VERSION
        assert "authorization" not in md  # no credentials, no signature
        client_ids.add(md["x-mq-client-id"])
        request_ids.add(md["x-mq-request-id"])
    assert len(client_ids) == 2  # one id per client object
    assert len(request_ids) == len([c for c in fake_server.calls if c[0] != "TelemetryCommand"])
    [(_, route_req)] = fake_server.methods("QueryRoute")[:1]
    assert route_req.topic.resource_namespace == "ns1" and route_req.endpoints.addresses[0].port == fake_server.port
    assert len(fake_server.methods("NotifyClientTermination")) == 2


@pytest.mark.timeout(30)
def test_telemetry_sends_producer_settings_with_every_topic_used(fake_server):
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://127.0.0.1:{fake_server.port}/") as ap,
        ap.create_producer(operation_timeout=2500) as p,
    ):
        p.send(oms.BytesMessage(b"x", "TopicA"))
        p.send(oms.BytesMessage(b"x", "TopicB"))

        def settings() -> list[definition_pb2.Settings]:
            return [c.settings for _, c in fake_server.methods("TelemetryCommand") if c.HasField("settings")]

        wait_until(lambda: any(len(s.publishing.topics) == 2 for s in settings()))
        last = settings()[-1]
        assert last.client_type == definition_pb2.PRODUCER
        assert sorted(t.name for t in last.publishing.topics) == ["TopicA", "TopicB"]
        assert last.publishing.max_body_size == 4 * 1024 * 1024 and last.request_timeout.seconds == 2
        assert last.user_agent.language == definition_pb2.PYTHON
        session = p._core.telemetry(next(iter(p._core.routes.endpoints())))  # type: ignore[union-attr]
        wait_until(lambda: session is not None and session.server_settings is not None)


@pytest.mark.timeout(30)
def test_compressed_body_and_pinned_queue_on_the_wire(fake_server):
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://127.0.0.1:{fake_server.port}/") as ap,
        ap.create_producer() as p,
    ):
        body = b"zip " * 5000
        result = p.send(oms.BytesMessage(body, "T"))
        assert result.queue_offset == 7 and result.queue.queue_id == -1
    [(_, request)] = fake_server.methods("SendMessage")
    sent = request.messages[0]
    assert sent.system_properties.body_encoding == definition_pb2.GZIP
    assert oms.convert.decode_body(sent.body, sent.system_properties.body_encoding) == body


@pytest.mark.timeout(30)
def test_credentials_sign_every_call_including_the_telemetry_stream(fake_server, monkeypatch):
    signed: list[tuple[str, str, object]] = []

    def signing_metadata(access_key, secret_key, session_token=None, now=None):
        signed.append((access_key, secret_key, session_token))
        return [("x-mq-date-time", "20240101T000000Z"), ("authorization", f"MQv2-HMAC-SHA1 Credential={access_key}")]

    fake = types.ModuleType("orbitmq.v2.signature")
    fake.signing_metadata = signing_metadata  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "orbitmq.v2.signature", fake)
    url = f"oms:rocketmq://127.0.0.1:{fake_server.port}/"
    with oms.get_messaging_access_point(url, access_key="AK", secret_key="SK") as ap, ap.create_producer() as p:
        p.send(oms.BytesMessage(b"x", "T"))
        wait_until(lambda: bool(fake_server.methods("Telemetry")))
    for method, md, _ in fake_server.calls:
        if method != "TelemetryCommand":
            assert md["authorization"] == "MQv2-HMAC-SHA1 Credential=AK", method
            assert md["x-mq-date-time"] == "20240101T000000Z"
    assert signed and all(s == ("AK", "SK", None) for s in signed)


@pytest.mark.timeout(30)
def test_credentials_without_a_signer_fail_clearly(fake_server, monkeypatch):
    monkeypatch.setitem(sys.modules, "orbitmq.v2.signature", None)  # import raises ImportError
    url = f"oms:rocketmq://127.0.0.1:{fake_server.port}/"
    attrs = {"ACCOUNT_KEY": "AK", "ACCOUNT_SECRET": "SK"}
    with oms.get_messaging_access_point(url, attrs) as ap:
        with pytest.raises(oms.OMSSecurityException) as err:
            ap.create_producer().startup()
        assert err.value.code == Code.UNAUTHORIZED


@pytest.mark.timeout(30)
def test_routes_refresh_and_heartbeats_run_in_the_background(fake_server, monkeypatch):
    import oms.client.core as core

    monkeypatch.setattr(core, "ROUTE_REFRESH_S", 0.1)
    monkeypatch.setattr(core, "FIRST_HEARTBEAT_S", 0.05)
    monkeypatch.setattr(core, "HEARTBEAT_S", 0.1)
    url = f"oms:rocketmq://127.0.0.1:{fake_server.port}/"
    with oms.get_messaging_access_point(url) as ap, ap.create_producer() as p:
        p.send(oms.BytesMessage(b"x", "T"))
        wait_until(lambda: len(fake_server.methods("QueryRoute")) >= 4 and len(fake_server.methods("Heartbeat")) >= 3)
    [(_, hb)] = fake_server.methods("Heartbeat")[:1]
    assert hb.client_type == definition_pb2.PRODUCER
