"""The broker's table of remoting clients, with a fake clock: which heartbeats, unregisters, closed connections and
expiries change a consumer group (what NOTIFY_CONSUMER_IDS_CHANGED is sent for)."""

from __future__ import annotations

from broker.remoting.clients import RemotingClients


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _hb(client_id: str, subs: dict[str, list[str]], producers: tuple[str, ...] = ()) -> dict[str, object]:
    return {
        "clientID": client_id,
        "consumerDataSet": [
            {"groupName": g, "subscriptionDataSet": [{"topic": t, "subString": "*"} for t in topics]}
            for g, topics in subs.items()
        ],
        "producerDataSet": [{"groupName": p} for p in producers],
    }


def test_changes_are_joins_leaves_and_new_subscriptions() -> None:
    clients = RemotingClients(expire_s=10, clock=Clock())
    assert clients.heartbeat(_hb("c1", {"G1": ["T"], "G2": ["T"]}), "h:1", "JAVA", 453) == {"G1", "G2"}
    assert clients.heartbeat(_hb("c1", {"G1": ["T"], "G2": ["T"]}), "h:1", "JAVA", 453) == set(), "nothing new"
    assert clients.heartbeat(_hb("c1", {"G1": ["T", "U"], "G2": ["T"]}), "h:1", "JAVA", 453) == {"G1"}
    assert clients.heartbeat(_hb("c1", {"G1": ["T", "U"]}), "h:2", "JAVA", 453) == {"G2"}, "left G2"
    assert clients.get("c1") is not None and clients.get("c1").peer == "h:2", "the newest connection"


def test_unregister_of_one_group_keeps_the_others() -> None:
    clients = RemotingClients(expire_s=10, clock=Clock())
    clients.heartbeat(_hb("c1", {"G1": ["T"], "G2": ["T"]}, producers=("P",)), "h:1", "JAVA", 453)
    assert clients.unregister("c1", consumer_group="G1") == {"G1"}
    assert clients.consumer_ids("G1") == [] and clients.consumer_ids("G2") == ["c1"]
    assert [c.client_id for c in clients.producers("P")] == ["c1"]
    assert clients.unregister("c1", consumer_group="G2", producer_group="P") == {"G2"}
    assert clients.get("c1") is None, "nothing left: the client is gone"
    assert clients.unregister("c1") == set()


def test_closed_connections_and_expiry_drop_their_clients() -> None:
    clock = Clock()
    clients = RemotingClients(expire_s=10, clock=clock)
    clients.heartbeat(_hb("c1", {"G1": ["T"]}), "h:1", "JAVA", 453)
    clients.heartbeat(_hb("c2", {"G2": ["T"]}), "h:2", "JAVA", 453)
    assert clients.disconnected("h:1") == {"G1"} and clients.get("c1") is None
    clock.now += 11
    assert clients.consumer_ids("G2") == [], "silent past clientExpireMs: no longer a member"
    assert clients.expire() == {"G2"} and clients.get("c2") is None
