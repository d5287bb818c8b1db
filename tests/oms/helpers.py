"""Helpers for oms tests: read messages back with raw v2 PullMessage, create typed topics over the admin API."""

from __future__ import annotations

import grpc
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import raw_client


def create_topic(addr: str, topic: str, message_type: str = "NORMAL", queues: int = 4, perm: int = 6) -> None:
    with grpc.insecure_channel(addr) as ch:
        cfg = admin_pb2.TopicConfig(
            topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm, message_type=message_type
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(
            admin_pb2.CreateOrUpdateTopicRequest(config=cfg), timeout=10
        )
        assert resp.status.code == definition_pb2.Code.OK, resp.status


def pull_all(
    addr: str, topic: str, queues: int = 4, group: str = "oms-test-reader"
) -> dict[int, list[definition_pb2.Message]]:
    """Every stored message of ``topic`` on the broker at ``addr``, per queue id, in queue order."""
    out: dict[int, list[definition_pb2.Message]] = {}
    with raw_client(addr) as client:
        for qid in range(queues):
            offset, got = 0, []
            while True:
                result = client.pull(group, topic, qid, offset, batch=256)
                if not result.messages:
                    break
                got.extend(result.messages)
                offset = result.next_offset if result.next_offset is not None else offset + len(result.messages)
            out[qid] = got
    return out


def bodies(addr: str, topic: str, queues: int = 4) -> list[bytes]:
    return [m.body for msgs in pull_all(addr, topic, queues).values() for m in msgs]
