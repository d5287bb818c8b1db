"""The admin core without servers: it opens no gRPC channel of its own (it takes the access point's pooled ones), and
its one upsert path refuses bad topic and group values before any broker is asked."""

from __future__ import annotations

import asyncio
import re

import grpc.aio
import pytest

from oms.admin.configs import GROUPS, TOPICS, GroupChanges, TopicChanges
from oms.admin.core import AdminCore
from oms.client.core import Runtime
from oms.client.endpoints import Endpoint
from oms.client.rpc import ChannelPool
from oms.errors import OMSMessageFormatException
from orbitmq.errors import Code

NAMESRV = Endpoint.of([("127.0.0.1", 19876)])
BROKER_A = "127.0.0.1:10911"
BROKER_B = "127.0.0.1:10921"


def core_over(pool: ChannelPool) -> AdminCore:
    # the loop is not used: these tests only build stubs, and refuse input before any call
    return AdminCore(Runtime(loop=None, pool=pool, access_point=NAMESRV, namespace="", credentials=None), 1.0)  # type: ignore[arg-type]


def test_admin_calls_share_the_access_points_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real = grpc.aio.insecure_channel

    def counting(target: str, *args: object, **kwargs: object) -> grpc.aio.Channel:
        opened.append(target)
        return real(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grpc.aio, "insecure_channel", counting)

    async def scenario() -> None:
        pool = ChannelPool()
        core = core_over(pool)
        broker_a = Endpoint.of([("127.0.0.1", 10911)])
        pool.stub(broker_a)  # a producer's channel to broker A, opened first
        assert core.admin_stub(BROKER_A) is core.admin_stub(BROKER_A)
        core.admin_stub(BROKER_B)
        core.namesrv_stub()
        pool.stub(NAMESRV)  # the access point's own QueryRoute channel
        await core.close()
        assert pool.channel(broker_a) is pool.channel(broker_a), "the core's close leaves the pool's channels alone"
        await pool.close()

    asyncio.run(scenario())
    assert sorted(opened) == sorted(["ipv4:127.0.0.1:19876", "ipv4:" + BROKER_A, "ipv4:" + BROKER_B])


@pytest.mark.parametrize(
    ("kind", "name", "changes", "field"),
    [
        (TOPICS, "T", TopicChanges(read_queue_nums=0), "read_queue_nums must be in 1..1024, got 0"),
        (TOPICS, "T", TopicChanges(perm=5), "perm must be 2 (write), 4 (read) or 6 (read-write), got 5"),
        (GROUPS, "G", GroupChanges(retry_max_times=-1), "retry_max_times must be >= 0, got -1"),
        (GROUPS, "G", GroupChanges(retry_queue_nums=0), "retry_queue_nums must be >= 1, got 0"),
    ],
)
def test_upsert_refuses_bad_values_before_any_broker(kind, name, changes, field) -> None:
    async def scenario() -> None:
        pool = ChannelPool()
        try:
            # no server listens on these ports: reaching one would fail with another code
            await core_over(pool).upsert(kind, name, changes, None, BROKER_A, merge=True, create=True)
        finally:
            await pool.close()

    with pytest.raises(OMSMessageFormatException, match=re.escape(field)) as raised:
        asyncio.run(scenario())
    assert raised.value.code == Code.BAD_REQUEST


def test_upsert_and_delete_check_the_name_by_kind() -> None:
    async def scenario(coro_of) -> None:
        pool = ChannelPool()
        try:
            await coro_of(core_over(pool))
        finally:
            await pool.close()

    with pytest.raises(OMSMessageFormatException) as raised:
        asyncio.run(
            scenario(lambda c: c.upsert(TOPICS, "bad name!", TopicChanges(), None, None, merge=True, create=True))
        )
    assert raised.value.code == Code.ILLEGAL_TOPIC
    with pytest.raises(OMSMessageFormatException) as raised:
        asyncio.run(scenario(lambda c: c.delete(GROUPS, "bad group!", None, None)))
    assert raised.value.code == Code.ILLEGAL_CONSUMER_GROUP
