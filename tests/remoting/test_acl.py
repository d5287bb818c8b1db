"""ACL on remoting as RocketMQ 4 does it: AccessKey and Signature (HmacSHA1, base64, over the ext field values sorted
by name, then the body) checked by the same ACL plugin and plain_acl.yml as the v2 protocol. A signed request
passes; no key, an unknown key, a bad signature or a missing permission gets NO_PERMISSION naming what failed;
ali-ons (which signs every request) produces and consumes with its account and is refused with a wrong secret."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.conftest import BrokerFactory, BrokerHandle
from tests.remoting.raw import RawClient, properties, sign
from tests.remoting.stack import Stack, drive, find_node, remoting_broker, remoting_stack, run_driver

pytestmark = pytest.mark.integration

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
      - AclRemotingT=PUB|SUB
      - AclPubOnly=PUB
    groupPerms:
      - GAclRemoting=SUB
"""


def _acl_options(tmp: Path) -> dict[str, str]:
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(ACL)
    return {"aclEnable": "true", "aclFile": str(acl_file)}


@pytest.fixture
def acl_broker(broker_factory: BrokerFactory, tmp_path: Path) -> BrokerHandle:
    return remoting_broker(broker_factory, _acl_options(tmp_path))


def _send(topic: str, body: bytes = b"hello") -> RemotingCommand:
    return RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        ext_fields={"a": "PG_ACL", "b": topic, "e": "0", "i": properties(TAGS="T")},
        body=body,
    )


def _pull(topic: str, group: str) -> RemotingCommand:
    header = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "8",
              "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0"}  # fmt: skip
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header)


def _refused(answer: RemotingCommand, *words: str) -> None:
    assert answer.code == ResponseCode.NO_PERMISSION, (answer.code, answer.remark)
    for word in words:
        assert word in (answer.remark or ""), (word, answer.remark)


@pytest.mark.timeout(60)
def test_signed_requests_pass_and_refusals_name_what_failed(acl_broker: BrokerHandle) -> None:
    with RawClient(int(acl_broker.options["remotingListenPort"])) as c:
        sent = c.call(sign(_send("AclRemotingT"), "appAK", "appSecret1"))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        pulled = c.call(sign(_pull("AclRemotingT", "GAclRemoting"), "appAK", "appSecret1"))
        assert pulled.code == ResponseCode.SUCCESS and b"hello" in pulled.body

        _refused(c.call(_send("AclRemotingT")), "'AccessKey'")
        _refused(c.call(sign(_send("AclRemotingT"), "nobodyAK", "x")), "'nobodyAK'", "not known")
        _refused(c.call(sign(_send("AclRemotingT"), "appAK", "wrong-secret")), "'Signature'", "'appAK'")
        tampered = sign(_send("AclRemotingT"), "appAK", "appSecret1")
        tampered.body = b"changed after signing"
        _refused(c.call(tampered), "'Signature'")
        tampered = sign(_send("AclRemotingT"), "appAK", "appSecret1")
        tampered.ext_fields["b"] = "AclPubOnly"
        _refused(c.call(tampered), "'Signature'")

        # permissions: the account's topicPerms / groupPerms, as for v2
        _refused(c.call(sign(_send("AclOtherT"), "appAK", "appSecret1")), "'appAK'", "PUB", "'AclOtherT'")
        assert c.call(sign(_send("AclPubOnly"), "appAK", "appSecret1")).code == ResponseCode.SUCCESS
        _refused(c.call(sign(_pull("AclPubOnly", "GAclRemoting"), "appAK", "appSecret1")), "SUB", "'AclPubOnly'")
        _refused(c.call(sign(_pull("AclRemotingT", "GOtherGroup"), "appAK", "appSecret1")), "'GOtherGroup'")
        heartbeat = RemotingCommand(
            RequestCode.HEART_BEAT,
            body=b'{"clientID":"c1","consumerDataSet":[{"groupName":"GOtherGroup","subscriptionDataSet":[]}]}',
        )
        _refused(c.call(sign(heartbeat, "appAK", "appSecret1")), "'GOtherGroup'")
        # an admin account without resource entries may do everything
        assert c.call(sign(_send("AclOtherT"), "adminAK", "adminSecret1")).code == ResponseCode.SUCCESS
        # unknown codes are still unknown, whoever asks
        assert c.call(RemotingCommand(9999)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


@pytest.fixture(scope="module")
def node() -> str:
    return find_node()


@pytest.fixture(scope="module")
def acl_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("remoting-acl")
    with remoting_stack(tmp, _acl_options(tmp), name="remoting-acl", credentials=("adminAK", "adminSecret1")) as st:
        yield st


@pytest.mark.timeout(180)
def test_ali_ons_signs_and_is_checked(node: str, acl_stack: Stack) -> None:
    app = {"ALI_ONS_AK": "appAK", "ALI_ONS_SK": "appSecret1"}
    sent = run_driver(node, "produce", acl_stack.remoting_ns, "AclRemotingT", "2", env=app)
    assert [s["status"] for s in sent] == ["SEND_OK"] * 2, sent
    consumed = run_driver(node, "consume", acl_stack.remoting_ns, "AclRemotingT", "GAclRemoting", "*", "2", "60000",
                          env=app)  # fmt: skip
    assert sorted(str(c["body"]) for c in consumed) == ["ali-0", "ali-1"]

    # ali-ons reports a refused send without the broker's remark: the broker's log names it
    wrong = drive(node, "produce", acl_stack.remoting_ns, "AclRemotingT", "1",
                  env={"ALI_ONS_AK": "appAK", "ALI_ONS_SK": "not-the-secret"})  # fmt: skip
    assert wrong.returncode != 0 and "failed" in wrong.stderr, wrong.stderr[-2000:]
    assert "'Signature' check failed for access key 'appAK'" in acl_stack.broker.log()
    denied = drive(node, "produce", acl_stack.remoting_ns, "AclOtherT", "1", env=app)
    assert denied.returncode != 0, denied.stderr[-2000:]
    assert "no PUB permission on topic 'AclOtherT'" in acl_stack.broker.log()


TX_ACL = """
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: appAK
    secretKey: appSecret1
    defaultTopicPerm: DENY
    topicPerms:
      - AclTxT=PUB
  - accessKey: strangerAK
    secretKey: strangerSecret1
    defaultTopicPerm: DENY
    topicPerms:
      - OtherT=PUB
"""


@pytest.mark.timeout(60)
def test_transaction_checks_go_only_to_producers_allowed_to_publish(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """A check-back carries the message: a client of the producer group whose account may not publish to the topic
    is never asked (v2's check-back is guarded the same way)."""
    acl_file = tmp_path / "tx_acl.yml"
    acl_file.write_text(TX_ACL)
    options = {"aclEnable": "true", "aclFile": str(acl_file), "transactionTimeOut": "500",
               "transactionCheckInterval": "200"}  # fmt: skip
    port = int(remoting_broker(broker_factory, options).options["remotingListenPort"])
    group = "PG_ACL_TX"
    with RawClient(port) as app, RawClient(port) as stranger:
        for client, ak, sk in ((app, "appAK", "appSecret1"), (stranger, "strangerAK", "strangerSecret1")):
            body = json.dumps({"clientID": ak, "producerDataSet": [{"groupName": group}]}).encode()
            assert client.call(sign(RemotingCommand(RequestCode.HEART_BEAT, body=body), ak, sk)).code == 0
        header = {"a": group, "b": "AclTxT", "e": "0", "f": "4",
                  "i": properties(TRAN_MSG="true", PGROUP=group, UNIQ_KEY="ACLTX1")}  # fmt: skip
        sent = app.call(
            sign(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=b"x"), "appAK", "appSecret1")
        )
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        checks = [app.next_request(RequestCode.CHECK_TRANSACTION_STATE, timeout=10) for _ in range(2)]
        assert all(c is not None for c in checks), "the allowed producer is asked, again and again"
        assert stranger.next_request(RequestCode.CHECK_TRANSACTION_STATE, timeout=0.3) is None
