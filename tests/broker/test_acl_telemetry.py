"""Telemetry under ACL in a real broker: the topics and group a client declares are authorized, and the check-back of
an orphan half message (its whole body) goes only to a producer allowed to publish to the topic."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

import oms
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.v2.signature import signing_metadata
from tests.broker.v2client import METADATA, message
from tests.waiting import wait_until

OK = definition_pb2.Code.OK
FORBIDDEN = definition_pb2.Code.FORBIDDEN
TOPIC, GROUP = "AclTxT", "AclTxG"
ACL = f"""
accounts:
  - accessKey: adminAK
    secretKey: adminSecret1
    admin: true
  - accessKey: prodAK
    secretKey: prodSecret1
    topicPerms:
      - {TOPIC}=PUB
  - accessKey: revokedAK
    secretKey: revokedSecret1
    topicPerms:
      - {TOPIC}=PUB
  - accessKey: consAK
    secretKey: consSecret1
    topicPerms:
      - {TOPIC}=SUB
    groupPerms:
      - {GROUP}=SUB
"""


class TelemetryStream:
    """A raw Telemetry stream signed by one account; every command the broker sends is collected."""

    def __init__(self, addr: str, client_id: str, ak: str, sk: str) -> None:
        self.metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), *signing_metadata(ak, sk))
        self.channel = grpc.insecure_channel(addr)
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)
        self._outgoing: queue.Queue[service_pb2.TelemetryCommand | None] = queue.Queue()
        self.received: list[service_pb2.TelemetryCommand] = []
        self._call = self.stub.Telemetry(self._requests(), metadata=self.metadata)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _requests(self) -> Iterator[service_pb2.TelemetryCommand]:
        while (command := self._outgoing.get()) is not None:
            yield command

    def _read(self) -> None:
        try:
            for command in self._call:
                self.received.append(command)
        except grpc.RpcError:
            pass  # cancelled at close

    def send(self, settings: definition_pb2.Settings) -> service_pb2.TelemetryCommand:
        before = len(self.received)
        self._outgoing.put(service_pb2.TelemetryCommand(settings=settings))
        wait_until(lambda: len(self.received) > before, 30, what="the settings reply")
        return self.received[before]

    def checks(self) -> list[service_pb2.TelemetryCommand]:
        return [c for c in self.received if c.HasField("recover_orphaned_transaction_command")]

    def close(self) -> None:
        self._outgoing.put(None)
        self._call.cancel()
        self.channel.close()


def _publishing(*topics: str) -> definition_pb2.Settings:
    return definition_pb2.Settings(
        client_type=definition_pb2.ClientType.PRODUCER,
        publishing=definition_pb2.Publishing(topics=[definition_pb2.Resource(name=t) for t in topics]),
    )


def _subscribing(group: str, topic: str) -> definition_pb2.Settings:
    entry = definition_pb2.SubscriptionEntry(
        topic=definition_pb2.Resource(name=topic),
        expression=definition_pb2.FilterExpression(type=definition_pb2.TAG, expression="*"),
    )
    return definition_pb2.Settings(
        client_type=definition_pb2.ClientType.SIMPLE_CONSUMER,
        subscription=definition_pb2.Subscription(group=definition_pb2.Resource(name=group), subscriptions=[entry]),
    )


@pytest.fixture
def tx_broker(broker_factory, tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    options = {
        "aclEnable": "true",
        "aclFile": str(acl_file),
        "transactionTimeOut": "300",
        "transactionCheckInterval": "200",
        "transactionCheckMax": "1000",
    }
    broker = broker_factory.broker(options=options)
    broker.acl_file = acl_file  # type: ignore[attr-defined]
    with grpc.insecure_channel(broker.addr) as ch:
        cfg = admin_pb2.TopicConfig(
            topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2, perm=6, message_type="TRANSACTION"
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(
            admin_pb2.CreateOrUpdateTopicRequest(config=cfg), metadata=signing_metadata("adminAK", "adminSecret1")
        )
        assert resp.status.code == OK, resp.status
    return broker


@pytest.mark.timeout(120)
def test_declared_settings_are_authorized_and_checks_reach_only_publishers(tx_broker):
    addr = tx_broker.addr
    # A consumer-only account may not declare itself a producer of the topic...
    posing = TelemetryStream(addr, "attacker@1@0@producer", "consAK", "consSecret1")
    # ...nor turn a permitted consumer registration into a producer one with a heartbeat.
    switching = TelemetryStream(addr, "attacker@1@0@consumer", "consAK", "consSecret1")
    revoked: TelemetryStream | None = None
    try:
        refused = posing.send(_publishing(TOPIC))
        assert refused.status.code == FORBIDDEN
        assert TOPIC in refused.status.message and "consAK" in refused.status.message
        assert switching.send(_subscribing(GROUP, TOPIC)).HasField("settings")
        heartbeat = service_pb2.HeartbeatRequest(client_type=definition_pb2.ClientType.PRODUCER)
        assert switching.stub.Heartbeat(heartbeat, metadata=switching.metadata, timeout=10).status.code == OK
        # the producer account may not subscribe as a group it has no permission on
        other = TelemetryStream(addr, "producer@1@0@consumer", "prodAK", "prodSecret1")
        try:
            assert other.send(_subscribing(GROUP, TOPIC)).status.code == FORBIDDEN
        finally:
            other.close()

        # A producer that was allowed when it declared itself, then lost PUB in the ACL file: no checks any more.
        revoked = TelemetryStream(addr, "revoked@1@0@producer", "revokedAK", "revokedSecret1")
        assert revoked.send(_publishing(TOPIC)).HasField("settings")
        tx_broker.acl_file.write_text(
            ACL.replace(f"      - {TOPIC}=PUB\n  - accessKey: consAK", "  - accessKey: consAK")
        )
        wait_until(lambda: _send_code(addr, "revokedAK", "revokedSecret1") == FORBIDDEN, 30, what="the ACL reload")

        checks: list[str] = []

        def checker(message: oms.BytesMessage, context: oms.TransactionContext) -> str:
            # "unknown" the first time: every half is checked at least twice, so a round robin over the
            # candidates would reach each of them
            checks.append(message.get_body(str))
            return "commit" if checks.count(message.get_body(str)) >= 2 else "unknown"

        url = f"oms:rocketmq://{addr}/"
        with (
            oms.get_messaging_access_point(url, access_key="prodAK", secret_key="prodSecret1") as ap,
            ap.create_producer(transaction_checker=checker) as p,
        ):
            unknown = oms.TransactionResolution.UNKNOWN
            for i in range(3):
                sent = p.send(oms.BytesMessage(f"orphan-{i}".encode(), TOPIC), lambda m, ctx: unknown)
                assert sent.transaction_resolution is unknown
            wait_until(lambda: len(checks) >= 6, 60, what="the real producer's check-backs")
        assert posing.checks() == [] and switching.checks() == [] and revoked.checks() == []
    finally:
        posing.close()
        switching.close()
        if revoked is not None:
            revoked.close()


def _send_code(addr: str, ak: str, sk: str) -> int:
    with grpc.insecure_channel(addr) as ch:
        request = service_pb2.SendMessageRequest(messages=[message(TOPIC)])
        metadata = (*METADATA, *signing_metadata(ak, sk))
        response = service_pb2_grpc.MessagingServiceStub(ch).SendMessage(request, metadata=metadata, timeout=10)
        return int(response.status.code)
