"""NOTIFY_CONSUMER_IDS_CHANGED: the broker tells a group's remoting consumers, oneway on their connections, when the
group's membership changes (a new client's heartbeat, an unregister, a closed connection, an expired client), as
RocketMQ's ConsumerManager does; other groups hear nothing."""

from __future__ import annotations

import time

import pytest

from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.conftest import BrokerFactory
from tests.remoting.raw import RawClient
from tests.remoting.stack import remoting_broker

pytestmark = pytest.mark.integration

NOTIFY = RequestCode.NOTIFY_CONSUMER_IDS_CHANGED


def _notified(client: RawClient, group: str, timeout: float = 10) -> None:
    request = client.next_request(NOTIFY, timeout)
    assert request is not None, f"no NOTIFY_CONSUMER_IDS_CHANGED for {group} within {timeout}s"
    assert request.is_oneway and request.ext_fields == {"consumerGroup": group}


@pytest.mark.timeout(90)
def test_group_members_hear_of_joins_leaves_and_expiry(broker_factory: BrokerFactory) -> None:
    # clients expire after 3 s without a heartbeat (the housekeeping scans every 0.75 s)
    broker = remoting_broker(broker_factory, {"clientExpireMs": "3000"})
    port = int(broker.options["remotingListenPort"])
    subs = {"GNotify": "NotifyT"}
    with RawClient(port) as a, RawClient(port) as b, RawClient(port) as other:
        assert a.heartbeat("client-a", consumer_groups=subs).code == ResponseCode.SUCCESS
        _notified(a, "GNotify")  # its own arrival, as RocketMQ notifies every channel of the group
        assert other.heartbeat("client-other", consumer_groups={"GOther": "NotifyT"}).code == ResponseCode.SUCCESS
        _notified(other, "GOther")
        assert a.next_request(NOTIFY, 0.5) is None, "another group's change is not this group's"

        # a second client joins: both members hear it; a repeated heartbeat changes nothing
        b.heartbeat("client-b", consumer_groups=subs)
        _notified(a, "GNotify")
        _notified(b, "GNotify")
        a.heartbeat("client-a", consumer_groups=subs)
        assert a.next_request(NOTIFY, 0.5) is None, "a heartbeat that changes nothing notifies nobody"

        # b unregisters: a hears it
        b.call(
            RemotingCommand(
                RequestCode.UNREGISTER_CLIENT, ext_fields={"clientID": "client-b", "consumerGroup": "GNotify"}
            )
        )
        _notified(a, "GNotify")
        assert other.next_request(NOTIFY, 0.2) is None

        # b comes back: a hears it
        b.heartbeat("client-b", consumer_groups=subs)
        _notified(a, "GNotify")
    with RawClient(port) as a2, RawClient(port) as c:
        a2.heartbeat("client-a2", consumer_groups=subs)
        _notified(a2, "GNotify")
        c.heartbeat("client-c", consumer_groups=subs)
        _notified(a2, "GNotify")
        # c falls silent (its connection stays open): it expires, and a2, heartbeating, hears it
        deadline = time.monotonic() + 15
        heard = None
        while heard is None and time.monotonic() < deadline:
            a2.heartbeat("client-a2", consumer_groups=subs)
            heard = a2.next_request(NOTIFY, 0.5)
        assert heard is not None and heard.ext_fields == {"consumerGroup": "GNotify"}, "c expired"
        listed = a2.call(
            RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": "GNotify"})
        )
        assert b"client-c" not in listed.body and b"client-a2" in listed.body


@pytest.mark.timeout(60)
def test_a_closed_connection_is_a_membership_change(broker_factory: BrokerFactory) -> None:
    broker = remoting_broker(broker_factory)
    port = int(broker.options["remotingListenPort"])
    subs = {"GClose": "CloseT"}
    with RawClient(port) as a:
        a.heartbeat("client-a", consumer_groups=subs)
        _notified(a, "GClose")
        with RawClient(port) as b:
            b.heartbeat("client-b", consumer_groups=subs)
            _notified(a, "GClose")
        _notified(a, "GClose")  # b's connection closed
        listed = a.call(RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": "GClose"}))
        assert b"client-b" not in listed.body
