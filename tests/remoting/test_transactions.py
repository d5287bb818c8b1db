"""Transactions over remoting, byte for byte as a RocketMQ 4 producer speaks them (ali-ons has no transaction
producer): half messages are held back until END_TRANSACTION commits them, a rollback drops them, a wrong header is
refused naming the field, and a half left unresolved is checked back with CHECK_TRANSACTION_STATE on the producer's
connection, whose END_TRANSACTION answer ends it."""

from __future__ import annotations

import uuid

import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.broker.v2client import METADATA, raw_client
from tests.conftest import BrokerFactory, BrokerHandle
from tests.remoting.raw import RawClient, first_message, properties, rocketmq_batch
from tests.remoting.stack import remoting_broker
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

GROUP = "PG_REMOTING_TX"
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0  # MessageSysFlag's transaction types
PREPARED_SYS_FLAG = 4


@pytest.fixture
def tx_broker(broker_factory: BrokerFactory) -> BrokerHandle:
    # a half is checked 1 s after it is stored, scans every 300 ms
    return remoting_broker(broker_factory, {"transactionTimeOut": "1000", "transactionCheckInterval": "300"})


def _port(broker: BrokerHandle) -> int:
    return int(broker.options["remotingListenPort"])


def send_half(client: RawClient, topic: str, body: bytes, *, marked_by: str = "both") -> RemotingCommand:
    props = {"PGROUP": GROUP, "UNIQ_KEY": uuid.uuid4().hex.upper()}
    if marked_by in ("both", "property"):
        props["TRAN_MSG"] = "true"
    sys_flag = PREPARED_SYS_FLAG if marked_by in ("both", "sysflag") else 0
    header = {"a": GROUP, "b": topic, "e": "0", "f": str(sys_flag), "i": properties(**props)}
    answer = client.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=body))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.ext_fields["transactionId"] == props["UNIQ_KEY"]
    return answer


def end(
    client: RawClient, sent: RemotingCommand, resolution: int, *, group: str = GROUP, **overrides: str
) -> RemotingCommand:
    header = {
        "producerGroup": group,
        "tranStateTableOffset": sent.ext_fields["queueOffset"],
        "commitLogOffset": str(int(sent.ext_fields["msgId"][-16:], 16)),  # the offset message id's last 8 bytes
        "commitOrRollback": str(resolution),
        "fromTransactionCheck": "false",
        "msgId": sent.ext_fields["transactionId"],
        **overrides,
    }
    return client.call(RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=header))


def pull(client: RawClient, topic: str, offset: int = 0) -> RemotingCommand:
    header = {"consumerGroup": "GTxReader", "topic": topic, "queueId": "0", "queueOffset": str(offset),
              "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0"}  # fmt: skip
    return client.call(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header))


@pytest.mark.timeout(60)
def test_half_messages_wait_for_commit_and_vanish_on_rollback(tx_broker: BrokerHandle) -> None:
    topic = "RemotingTxT"
    with RawClient(_port(tx_broker)) as producer:
        committed = send_half(producer, topic, b"commit-me", marked_by="property")
        rolled_back = send_half(producer, topic, b"roll-me-back", marked_by="sysflag")
        assert pull(producer, topic).code == ResponseCode.PULL_NOT_FOUND, "half messages are not consumable"

        assert end(producer, committed, COMMIT).code == ResponseCode.SUCCESS
        assert end(producer, rolled_back, ROLLBACK).code == ResponseCode.SUCCESS
        found = pull(producer, topic)
        assert found.code == ResponseCode.SUCCESS, found.remark
        queue_offset, sys_flag, body, real_topic, props = first_message(found.body)
        assert (queue_offset, body, real_topic) == (0, b"commit-me", topic)
        assert sys_flag & 0xC == COMMIT and "TRAN_MSG" not in props, "a committed message, no longer prepared"
        assert found.ext_fields["nextBeginOffset"] == "1", "the rolled-back half never reaches the topic"

        again = end(producer, committed, COMMIT)
        assert again.code == ResponseCode.SYSTEM_ERROR and "already ended" in (again.remark or "")


@pytest.mark.timeout(60)
def test_end_transaction_refusals_name_the_field(tx_broker: BrokerHandle) -> None:
    topic = "RemotingTxBadT"
    with RawClient(_port(tx_broker)) as producer:
        sent = send_half(producer, topic, b"x")
        wrong_group = end(producer, sent, COMMIT, group="PG_OTHER")
        assert wrong_group.code == ResponseCode.SYSTEM_ERROR and "producerGroup" in (wrong_group.remark or "")
        wrong_offset = end(producer, sent, COMMIT, tranStateTableOffset="999")
        assert wrong_offset.code == ResponseCode.SYSTEM_ERROR and "tranStateTableOffset" in (wrong_offset.remark or "")
        unknown = end(producer, sent, COMMIT, commitLogOffset="123456789")
        assert unknown.code == ResponseCode.SYSTEM_ERROR and "commitLogOffset 123456789" in (unknown.remark or "")
        bad_type = end(producer, sent, 5)
        assert bad_type.code == ResponseCode.SYSTEM_ERROR and "commitOrRollback" in (bad_type.remark or "")
        missing = producer.call(RemotingCommand(RequestCode.END_TRANSACTION, ext_fields={"producerGroup": GROUP}))
        assert missing.code == ResponseCode.SYSTEM_ERROR and "tranStateTableOffset" in (missing.remark or "")
        delayed = producer.call(
            RemotingCommand(
                RequestCode.SEND_MESSAGE_V2,
                ext_fields={"a": GROUP, "b": topic, "e": "0", "i": properties(TRAN_MSG="true", DELAY="3")},
                body=b"d",
            )
        )
        assert delayed.code == ResponseCode.MESSAGE_ILLEGAL and "DELAY" in (delayed.remark or "")
        batch = producer.call(
            RemotingCommand(
                RequestCode.SEND_MESSAGE_V2,
                ext_fields={"a": GROUP, "b": topic, "e": "0", "m": "true"},
                body=rocketmq_batch([b"b0", b"b1"], properties(TRAN_MSG="true")),
            )
        )
        assert batch.code == ResponseCode.MESSAGE_ILLEGAL and "cannot be batched" in (batch.remark or "")
        # none of the refusals ended it: the right header still commits
        assert end(producer, sent, COMMIT).code == ResponseCode.SUCCESS
        assert pull(producer, topic).code == ResponseCode.SUCCESS


@pytest.mark.timeout(60)
def test_unresolved_half_is_checked_back_on_the_producers_connection(tx_broker: BrokerHandle) -> None:
    topic = "RemotingTxCheckT"
    with RawClient(_port(tx_broker)) as producer, RawClient(_port(tx_broker)) as stranger:
        assert producer.heartbeat("tx-producer@1", producer_groups=(GROUP,)).code == ResponseCode.SUCCESS
        assert stranger.heartbeat("other-producer@1", producer_groups=("PG_STRANGER",)).code == ResponseCode.SUCCESS
        sent = send_half(producer, topic, b"ask-me")
        answered = end(producer, sent, UNKNOWN)  # "unknown": left for the check-back
        assert answered.code == ResponseCode.SUCCESS

        check = producer.next_request(RequestCode.CHECK_TRANSACTION_STATE, timeout=15)
        assert check is not None, "the broker asks the half message's producer group"
        assert check.is_oneway
        h = check.ext_fields
        assert h["commitLogOffset"] == str(int(sent.ext_fields["msgId"][-16:], 16))
        assert h["tranStateTableOffset"] == sent.ext_fields["queueOffset"]
        assert h["msgId"] == h["transactionId"] == sent.ext_fields["transactionId"]
        assert h["offsetMsgId"] == sent.ext_fields["msgId"]
        _offset, _flag, body, real_topic, props = first_message(check.body)
        assert (body, real_topic) == (b"ask-me", topic), "the producer sees the message as it sent it"
        assert "PGROUP\x01" + GROUP in props
        assert stranger.next_request(RequestCode.CHECK_TRANSACTION_STATE, timeout=0.5) is None

        # the Java client answers a check oneway, with fromTransactionCheck=true
        header = {"producerGroup": GROUP, "tranStateTableOffset": h["tranStateTableOffset"],
                  "commitLogOffset": h["commitLogOffset"], "commitOrRollback": str(COMMIT),
                  "fromTransactionCheck": "true", "msgId": h["msgId"], "transactionId": h["transactionId"]}  # fmt: skip
        producer.oneway(RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=header))

        found: list[RemotingCommand] = []

        def committed() -> bool:
            answer = pull(producer, topic)
            found.append(answer)
            return answer.code == ResponseCode.SUCCESS

        wait_until(committed, 10, what="the checked half committed", interval=0.2)
        assert first_message(found[-1].body)[2] == b"ask-me"


@pytest.mark.timeout(60)
def test_a_remoting_half_is_ended_over_v2(tx_broker: BrokerHandle) -> None:
    """One transaction service behind both protocols: v2 EndTransaction names a remoting half by its msgId."""
    topic = "RemotingTxV2T"
    with RawClient(_port(tx_broker)) as producer, raw_client(tx_broker.addr) as v2:
        sent = send_half(producer, topic, b"ended-over-v2")
        request = service_pb2.EndTransactionRequest(
            topic=definition_pb2.Resource(name=topic),
            message_id=sent.ext_fields["transactionId"],
            transaction_id=sent.ext_fields["msgId"],
            resolution=definition_pb2.COMMIT,
            source=definition_pb2.SOURCE_CLIENT,
        )
        ended = v2.stub.EndTransaction(request, metadata=METADATA, timeout=10)
        assert ended.status.code == definition_pb2.Code.OK, ended.status.message
        found = pull(producer, topic)
        assert found.code == ResponseCode.SUCCESS and first_message(found.body)[2] == b"ended-over-v2"
        assert end(producer, sent, COMMIT).code == ResponseCode.SYSTEM_ERROR, "already ended over v2"
