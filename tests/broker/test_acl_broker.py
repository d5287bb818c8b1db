"""ACL in a real broker: the official client signs with its credentials and works; unsigned, badly signed and
unpermitted requests get UNAUTHORIZED / FORBIDDEN naming the resource; the file is reloaded when it changes."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

import oms
from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.proto import admin_pb2, admin_pb2_grpc, pop_pb2, pop_pb2_grpc, produce_pb2, produce_pb2_grpc
from orbitmq.v2.signature import signing_metadata
from tests.broker.v2client import METADATA, message
from tests.pop.client_helpers import receive_until

OK = definition_pb2.Code.OK
UNAUTHORIZED = definition_pb2.Code.UNAUTHORIZED
FORBIDDEN = definition_pb2.Code.FORBIDDEN

ACL = """
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: adminAK
    secretKey: adminSecret1
    admin: true
  - accessKey: appAK
    secretKey: appSecret1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclT=PUB|SUB
      - AclPubOnly=PUB
    groupPerms:
      - AclG=SUB
"""


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    broker = broker_factory.broker(options={"aclEnable": "true", "aclFile": str(acl_file)})
    broker.acl_file = acl_file  # type: ignore[attr-defined]
    return broker


def _signed(ak: str, sk: str) -> tuple[tuple[str, str], ...]:
    return (*METADATA, *signing_metadata(ak, sk))


def _send(addr: str, topic: str, metadata: tuple[tuple[str, str], ...]) -> service_pb2.SendMessageResponse:
    with grpc.insecure_channel(addr) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        return stub.SendMessage(
            service_pb2.SendMessageRequest(messages=[message(topic)]), metadata=metadata, timeout=10
        )


@pytest.mark.timeout(120)
def test_official_client_with_credentials_produces_and_consumes(acl_broker):
    config = ClientConfiguration(acl_broker.addr, Credentials("appAK", "appSecret1"), request_timeout=5)
    producer = Producer(config, ("AclT",))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body, msg.tag = "AclT", b"secret", "T"
        assert producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, "AclG", {"AclT": FilterExpression("*")}, await_duration=2)
    consumer.startup()
    try:
        [got] = receive_until(consumer, 1, invisible_s=20)
        assert got.body == b"secret"
        consumer.ack(got)
    finally:
        consumer.shutdown()


@pytest.mark.timeout(120)
def test_refusals_name_the_resource_and_the_broker_keeps_serving(acl_broker):
    addr = acl_broker.addr
    unsigned = _send(addr, "AclT", METADATA)
    assert unsigned.status.code == UNAUTHORIZED
    bad_sig = _send(addr, "AclT", _signed("appAK", "wrong-secret"))
    assert bad_sig.status.code == UNAUTHORIZED
    unknown = _send(addr, "AclT", _signed("nobody", "whatever1"))
    assert unknown.status.code == UNAUTHORIZED and "nobody" in unknown.status.message
    denied = _send(addr, "OtherT", _signed("appAK", "appSecret1"))
    assert denied.status.code == FORBIDDEN and "OtherT" in denied.status.message
    assert _send(addr, "AclPubOnly", _signed("appAK", "appSecret1")).status.code == OK

    with grpc.insecure_channel(addr) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        pull = service_pb2.PullMessageRequest(
            group=definition_pb2.Resource(name="AclG"),
            message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name="AclPubOnly"), id=0),
            offset=0,
        )
        [resp] = list(stub.PullMessage(pull, metadata=_signed("appAK", "appSecret1"), timeout=10))
        assert resp.status.code == FORBIDDEN and "AclPubOnly" in resp.status.message

        admin = admin_pb2_grpc.AdminStub(ch)
        cfg = admin_pb2.TopicConfig(topic_name="AdminMade", read_queue_nums=2, write_queue_nums=2, perm=6)
        req = admin_pb2.CreateOrUpdateTopicRequest(config=cfg)
        refused = admin.CreateOrUpdateTopic(req, metadata=_signed("appAK", "appSecret1"), timeout=10)
        assert refused.status.code == FORBIDDEN
        assert admin.CreateOrUpdateTopic(req, metadata=_signed("adminAK", "adminSecret1"), timeout=10).status.code == OK

        # Produce/SendBatch goes through the same checkpoint (PUB on the topic).
        produce = produce_pb2_grpc.ProduceStub(ch)
        payload = encode_message_batch([BatchEntry(0, b"b", {"UNIQ_KEY": "ACLBATCH0001"})])

        def send_batch(topic: str, metadata: tuple[tuple[str, str], ...]) -> produce_pb2.SendBatchResponse:
            req = produce_pb2.SendBatchRequest(topic=topic, queue_id=-1, messages=payload, count=1)
            return produce.SendBatch(req, metadata=metadata, timeout=10)

        assert send_batch("AclT", METADATA).status.code == UNAUTHORIZED
        batch_denied = send_batch("OtherT", _signed("appAK", "appSecret1"))
        assert batch_denied.status.code == FORBIDDEN and "OtherT" in batch_denied.status.message
        assert send_batch("AclPubOnly", _signed("appAK", "appSecret1")).status.code == OK

        # Pop/AckBatch needs SUB on the topic, as v2 AckMessage does.
        ack = pop_pb2.AckBatchRequest(group="AclG", topic="AclPubOnly", receipt_handles=["x"])
        pop = pop_pb2_grpc.PopStub(ch)
        assert pop.AckBatch(ack, metadata=METADATA, timeout=10).status.code == UNAUTHORIZED
        ack_denied = pop.AckBatch(ack, metadata=_signed("appAK", "appSecret1"), timeout=10)
        assert ack_denied.status.code == FORBIDDEN and "AclPubOnly" in ack_denied.status.message
    assert _send(addr, "AclT", _signed("appAK", "appSecret1")).status.code == OK
    assert "access refused" in acl_broker.log()


@pytest.mark.timeout(120)
def test_acl_file_change_takes_effect(acl_broker):
    addr = acl_broker.addr
    assert _send(addr, "LaterT", _signed("appAK", "appSecret1")).status.code == FORBIDDEN
    acl_file: Path = acl_broker.acl_file  # type: ignore[attr-defined]
    acl_file.write_text(ACL.replace("      - AclPubOnly=PUB", "      - AclPubOnly=PUB\n      - LaterT=PUB"))
    deadline = time.monotonic() + 30
    code = FORBIDDEN
    while time.monotonic() < deadline and code != OK:
        time.sleep(0.5)
        code = _send(addr, "LaterT", _signed("appAK", "appSecret1")).status.code
    assert code == OK


@pytest.mark.timeout(120)
def test_oms_client_signs_with_its_credentials(acl_broker):
    url = f"oms:rocketmq://{acl_broker.addr}/"
    with (
        oms.get_messaging_access_point(url, access_key="appAK", secret_key="appSecret1") as ap,
        ap.create_producer() as producer,
    ):
        assert producer.send(oms.BytesMessage(b"signed", "AclT")).message_id
        with pytest.raises(oms.OMSSecurityException) as err:
            producer.send(oms.BytesMessage(b"x", "OtherT"))
        assert err.value.code == FORBIDDEN
    with oms.get_messaging_access_point(url, access_key="appAK", secret_key="not-the-secret") as ap:
        with ap.create_producer() as producer, pytest.raises(oms.OMSException) as err2:
            producer.send(oms.BytesMessage(b"x", "AclT"))
        assert err2.value.code == UNAUTHORIZED


@pytest.mark.timeout(120)
def test_an_emptied_acl_file_keeps_the_previous_rules(acl_broker):
    addr = acl_broker.addr
    acl_file: Path = acl_broker.acl_file  # type: ignore[attr-defined]
    acl_file.write_text("")  # an editor truncating the file, a failed copy: not "no accounts"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "ACL file not reloaded" not in acl_broker.log():
        assert _send(addr, "AclT", _signed("appAK", "appSecret1")).status.code == OK  # each request may reload
        time.sleep(0.3)
    assert "ACL file not reloaded" in acl_broker.log() and "empty" in acl_broker.log()
    assert _send(addr, "AclT", _signed("appAK", "appSecret1")).status.code == OK
    assert _send(addr, "OtherT", _signed("appAK", "appSecret1")).status.code == FORBIDDEN
    # a good file afterwards is picked up again
    acl_file.write_text(ACL.replace("      - AclPubOnly=PUB", "      - AclPubOnly=PUB\n      - OtherT=PUB"))
    deadline = time.monotonic() + 30
    code = FORBIDDEN
    while time.monotonic() < deadline and code != OK:
        time.sleep(0.5)
        code = _send(addr, "OtherT", _signed("appAK", "appSecret1")).status.code
    assert code == OK


@pytest.mark.timeout(60)
def test_admins_list_the_accounts_without_their_secrets(acl_broker):
    with (
        oms.get_messaging_access_point(
            f"oms:rocketmq://{acl_broker.addr}/", access_key="adminAK", secret_key="adminSecret1"
        ) as ap,
        ap.resource_manager() as rm,
    ):
        accounts = {a.access_key: a for a in rm.acl_accounts()}
    assert set(accounts) == {"adminAK", "appAK"}
    app = accounts["appAK"]
    assert (app.admin, app.default_topic_perm, app.default_group_perm) == (False, "DENY", "DENY")
    assert app.topic_perms == {"AclT": "PUB|SUB", "AclPubOnly": "PUB"} and app.group_perms == {"AclG": "SUB"}
    assert accounts["adminAK"].admin
    assert "Secret1" not in repr(accounts), "no secret leaves the broker"
    with (
        oms.get_messaging_access_point(
            f"oms:rocketmq://{acl_broker.addr}/", access_key="appAK", secret_key="appSecret1"
        ) as ap,
        ap.resource_manager() as rm,
        pytest.raises(oms.OMSSecurityException),
    ):
        rm.acl_accounts()  # only admins may list them
