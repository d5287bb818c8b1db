"""Who is connected: the producers and consumers each broker knows (consumerConnection, producerConnection,
consumerStatus), merged over brokers by client id."""

from __future__ import annotations

from oms.admin import models as m
from oms.admin.core import AdminCore, Broker, validated
from orbitmq.proto import admin_pb2
from orbitmq.validation import validate_group, validate_topic


async def client_connections(
    core: AdminCore, group: str | None, topic: str | None, producers: bool
) -> list[m.ClientConnection]:
    """Every client of ``group``/``topic`` some broker heard from; one row per client id (the freshest)."""
    if group:
        validated(validate_group, group)
    if topic:
        validated(validate_topic, topic, allow_system=True)
    brokers = await core.topic_brokers(topic, fallback=True) if topic else await core.masters()

    async def one(b: Broker) -> list[m.ClientConnection]:
        request = admin_pb2.ClientConnectionsRequest(group=group or "", topic=topic or "", producers=producers)
        stub = core.admin_stub(b.addr)
        response = await core.admin(stub.ClientConnections, request, f"ClientConnections on {b.name}")
        return [_connection(c, b.name) for c in response.connections]

    done = core.all_ok(await core.each(brokers, one), "list client connections")
    freshest: dict[str, m.ClientConnection] = {}
    for _, rows in done:
        for row in rows:
            known = freshest.get(row.client_id)
            if known is None or row.last_heartbeat_ms_ago < known.last_heartbeat_ms_ago:
                freshest[row.client_id] = row
    return sorted(freshest.values(), key=lambda c: (c.group, c.client_id))


def _connection(pb: admin_pb2.ClientConnection, broker_name: str) -> m.ClientConnection:
    return m.ClientConnection(
        broker_name=broker_name,
        client_id=pb.client_id,
        client_type=pb.client_type,
        address=pb.address,
        language=pb.language,
        version=pb.version,
        group=pb.group,
        subscriptions=dict(pb.subscriptions),
        topics=tuple(pb.topics),
        last_heartbeat_ms_ago=pb.last_heartbeat_ms_ago,
        connected=pb.connected,
        settings_json=pb.settings_json,
    )
