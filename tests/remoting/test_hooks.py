"""Message hooks on remoting sends: a third-party plugin's orbitmq_before_store stamps what a 4.x client sends
(single and batch, as for v2 sends) and its orbitmq_after_store sees where each message was stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.broker.test_plugins_broker import _install_example_plugin
from tests.conftest import BrokerFactory
from tests.remoting.raw import RawClient, first_message, properties, rocketmq_batch
from tests.remoting.stack import remoting_broker

pytestmark = pytest.mark.integration


@pytest.mark.timeout(60)
def test_remoting_sends_pass_through_the_message_hooks(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    env = _install_example_plugin(tmp_path / "site")
    broker = remoting_broker(broker_factory, {"defaultTopicQueueNums": "1"}, name="stamp-remoting", env=env)
    with RawClient(int(broker.options["remotingListenPort"])) as c:
        single = {"b": "StampRemotingT", "e": "0", "i": properties(TAGS="T")}
        assert c.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=single, body=b"one")).code == 0
        batch = {"b": "StampRemotingT", "e": "0", "m": "true"}
        body = rocketmq_batch([b"two", b"three"], "TAGS\x01T\x02")
        assert c.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=batch, body=body)).code == 0
        for offset, expected in enumerate((b"one", b"two", b"three")):
            header = {"consumerGroup": "GStamp", "topic": "StampRemotingT", "queueId": "0",
                      "queueOffset": str(offset), "maxMsgNums": "1", "sysFlag": "0"}  # fmt: skip
            pulled = c.call(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header))
            assert pulled.code == ResponseCode.SUCCESS, pulled.remark
            _o, _f, msg, _t, props = first_message(pulled.body)
            assert msg == expected and "stamped-by\x01example" in props
    log = broker.log()
    assert all(f"stored StampRemotingT {b!r} at {i}" in log for i, b in enumerate((b"one", b"two", b"three"))), log[
        -2000:
    ]
