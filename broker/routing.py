"""Topic routes as this broker answers them: the name servers' view in a cluster, its own table standalone.

Also the queue assignment of QueryAssignment (the group's allocation strategy over its live clients).
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2

from broker.context import BrokerContext
from broker.hookspecs import QueueRef
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.route import BrokerData, QueueData, TopicConfig, TopicRouteData
from orbitmq.v2.routes import route_assignments

log = get_logger("broker.routing")


def local_route(ctx: BrokerContext, tc: TopicConfig) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(ctx.broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.message_type)],
        broker_datas=[BrokerData(ctx.config.brokerClusterName, ctx.broker_name, {0: ctx.broker_addr})],
    )


async def topic_route(ctx: BrokerContext, topic: str, *, auto_create: bool = True) -> TopicRouteData:
    """The topic's route: the name servers' view when it exists anywhere in the cluster, else our own queues.

    A topic unknown everywhere is auto-created here when allowed (then registered at once), else TOPIC_NOT_FOUND.
    """
    tc = ctx.topics.get(topic)
    if ctx.registrar is not None:
        try:
            route = await ctx.registrar.get_route(topic)
        except Exception as exc:  # name servers down: fall back to our own queues
            log.warning("route lookup failed, answering with local queues", topic=topic, error=repr(exc))
            route = None
        if route is not None and route.queue_datas:
            if tc is not None and all(q.broker_name != ctx.broker_name for q in route.queue_datas):
                # Our registration has not reached the name server yet: still advertise ourselves.
                local = local_route(ctx, tc)
                route.queue_datas.extend(local.queue_datas)
                route.broker_datas.extend(local.broker_datas)
            return route
    if tc is None:
        if not auto_create:
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
        tc = ctx.topics.get_or_auto_create(topic)  # TOPIC_NOT_FOUND when autoCreateTopicEnable is off
        if ctx.registrar is not None:
            await ctx.registrar.register_now()
    return local_route(ctx, tc)


def _queue_ref(item: definition_pb2.Assignment) -> QueueRef:
    return QueueRef(item.message_queue.broker.name, item.message_queue.id)


async def assignments_for(
    ctx: BrokerContext, topic: definition_pb2.Resource, group: str, client_id: str
) -> list[definition_pb2.Assignment]:
    """The group's allocation strategy plugin over the live clients (every broker computes the same answer).

    When there are more clients than items, a client the strategy leaves without one still shares one: receive/ack
    assignments are not exclusive, and a consumer that never receives is worse than two that share a broker's
    queues. A strategy that leaves a client out on purpose (MACHINE_ROOM's other rooms) is respected otherwise."""
    route = await topic_route(ctx, topic.name, auto_create=False)
    group_cfg = ctx.groups.get_or_auto_create(group)
    all_items = route_assignments(topic, route, group_cfg.consume_message_orderly)
    if not all_items:
        raise MQError(Code.FORBIDDEN, f"topic {topic.name!r} has no readable queue")
    clients = sorted({c.client_id for c in ctx.telemetry.clients(group=group)} | {client_id})
    by_ref = {_queue_ref(item): item for item in all_items}
    strategy = group_cfg.allocate_strategy or ctx.config.defaultAllocateStrategy
    try:
        picked = ctx.plugins.allocate(strategy, group_cfg.allocate_options, group, client_id, list(by_ref), clients)
    except ValueError as exc:  # the strategy's own validation (AllocationError)
        raise MQError(Code.BAD_REQUEST, f"allocation strategy {strategy!r} of group {group!r}: {exc}") from exc
    if not picked and len(clients) > len(by_ref):
        refs = sorted(by_ref)
        picked = [refs[clients.index(client_id) % len(refs)]]
    return [by_ref[ref] for ref in picked]
