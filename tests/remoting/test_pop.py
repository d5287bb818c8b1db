"""Pop over remoting (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) on the broker's pop
service: popped messages carry RocketMQ's POP_CK extraInfo, stay invisible until acked or their invisible time ends,
come back with a higher reconsume count, and an ack of an older delivery is refused naming it."""

from __future__ import annotations

import struct
import time

import pytest

from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.conftest import BrokerFactory, BrokerHandle
from tests.remoting.raw import RawClient, first_message, properties
from tests.remoting.stack import remoting_broker

pytestmark = pytest.mark.integration

GROUP, TOPIC = "GRemotingPop", "RemotingPopT"


@pytest.fixture
def pop_broker(broker_factory: BrokerFactory) -> BrokerHandle:
    return remoting_broker(broker_factory, {"minInvisibleTimeMillsForRecv": "100", "defaultTopicQueueNums": "1"})


def _pop(c: RawClient, invisible_ms: int, poll_ms: int = 0, n: int = 32) -> RemotingCommand:
    header = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": str(n),
              "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms), "bornTime": str(int(time.time() * 1000)),
              "initMode": "0", "expType": "TAG", "exp": "*"}  # fmt: skip
    return c.call(RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=header))


def _messages(body: bytes) -> list[tuple[bytes, dict[str, str], int]]:
    """(body, properties, reconsume times) of each message in a MessageDecoder-layout body."""
    out = []
    pos = 0
    while pos < len(body):
        (total,) = struct.unpack_from(">i", body, pos)
        one = body[pos : pos + total]
        (reconsume,) = struct.unpack_from(">i", one, 72)
        _o, _f, msg, _t, props = first_message(one)
        out.append((msg, dict(p.split("\x01", 1) for p in props.split("\x02") if p), reconsume))
        pos += total
    return out


def _ack_header(props: dict[str, str], **extra: str) -> dict[str, str]:
    ck = props["POP_CK"].split(" ")
    return {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": ck[6],
        "offset": ck[7],
        "extraInfo": props["POP_CK"],
        **extra,
    }


@pytest.mark.timeout(60)
def test_pop_ack_and_change_invisible_time(pop_broker: BrokerHandle) -> None:
    with RawClient(int(pop_broker.options["remotingListenPort"])) as c:
        for body in (b"p0", b"p1"):
            header = {"b": TOPIC, "e": "0", "i": properties(TAGS="T")}
            sent = c.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=body))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        popped = _pop(c, invisible_ms=60_000)
        assert popped.code == ResponseCode.SUCCESS, popped.remark
        got = _messages(popped.body)
        assert [m[0] for m in got] == [b"p0", b"p1"] and [m[2] for m in got] == [0, 0]
        ck = got[0][1]["POP_CK"].split(" ")
        assert len(ck) == 8 and ck[1] == popped.ext_fields["popTime"] and ck[2] == "60000" and ck[5] == pop_broker.name
        assert popped.ext_fields["startOffsetInfo"] and popped.ext_fields["msgOffsetInfo"] == "0 0 0,1"

        empty = _pop(c, invisible_ms=60_000)
        assert empty.code == ResponseCode.PULL_NOT_FOUND, "both are invisible"

        # p0 acked; p1's invisible time shortened to 100 ms: it comes back, a second attempt
        assert c.call(RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=_ack_header(got[0][1]))).code == 0
        changed = c.call(RemotingCommand(RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                         ext_fields=_ack_header(got[1][1], invisibleTime="100")))  # fmt: skip
        assert changed.code == ResponseCode.SUCCESS, changed.remark
        assert changed.ext_fields["invisibleTime"] == "100"
        again = _pop(c, invisible_ms=60_000, poll_ms=5000)
        assert again.code == ResponseCode.SUCCESS, again.remark
        [(body, props, reconsume)] = _messages(again.body)
        assert (body, reconsume) == (b"p1", 1)

        # the older delivery's extraInfo no longer acks; the new one does
        stale = c.call(RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=_ack_header(got[1][1])))
        assert stale.code == ResponseCode.NO_MESSAGE and "not in flight" in (stale.remark or "")
        twice = c.call(RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=_ack_header(got[0][1])))
        assert twice.code == ResponseCode.NO_MESSAGE
        assert c.call(RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=_ack_header(props))).code == 0
        assert _pop(c, invisible_ms=60_000).code == ResponseCode.PULL_NOT_FOUND, "everything acked"

        # bad input names the field
        bad = c.call(RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=_ack_header(props, extraInfo="garbage")))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "'extraInfo'" in (bad.remark or "")
        too_short = _pop(c, invisible_ms=10)
        assert too_short.code == ResponseCode.INVALID_PARAMETER and "'invisibleTime'" in (too_short.remark or "")
        missing = c.call(RemotingCommand(RequestCode.POP_MESSAGE, ext_fields={"consumerGroup": GROUP, "topic": TOPIC}))
        assert missing.code == ResponseCode.SYSTEM_ERROR and "'queueId'" in (missing.remark or "")
