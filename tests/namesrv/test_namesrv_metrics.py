"""``/metrics`` of a real ``mqnamesrv`` (metricsExporterType=PROM in namesrv.conf) after known traffic: RocketMQ 5's
``rocketmq_rpc_latency`` with node_type="nameserver", over gRPC and remoting; and the metrics keys' start-up errors."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s

from orbitmq.metrics.constants import RPC_LATENCY_BUCKETS_MS
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.namesrv.helpers import client_metadata, internal_stub, namesrv_process, v2_stub
from tests.namesrv.test_v2_access_point import telemetry_exchange
from tests.procs import BIN, ROOT, free_port
from tests.remoting.client import remoting_call
from tests.scrape import buckets, scrape, value
from tests.v2.test_settings import producer_settings
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_namesrv_metrics_after_known_traffic(tmp_path: Path) -> None:
    prom, remoting = free_port(), free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"metricsExporterType=PROM\nmetricsPromExporterPort={prom}\nmetricsLabel=instance_id:n1\n"
        f"remotingListenPort={remoting}\n"
    )
    with namesrv_process(tmp_path, "-c", str(conf)) as (proc, addr):
        base = {"node_type": "nameserver", "node_id": addr, "instance_id": "n1"}
        with grpc.insecure_channel(addr) as channel:
            stub = v2_stub(channel)
            request = s.QueryRouteRequest(topic=d.Resource(name="NoSuchTopicMetrics"))
            for _ in range(3):
                reply = stub.QueryRoute(request, metadata=client_metadata(), timeout=10)
                assert reply.status.code == 40402, reply.status  # TOPIC_NOT_FOUND: an answer with its own code
            internal = internal_stub(channel)
            for _ in range(2):  # what mqadmin clusterList asks
                assert internal.GetBrokerClusterInfo(pb.GetClusterInfoRequest(), timeout=10).code == 20000
        for opaque in (1, 2):
            cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=opaque, ext_fields={"topic": "NoSuchT"})
            assert remoting_call(remoting, cmd).code == ResponseCode.TOPIC_NOT_EXIST

        metrics = scrape(prom)
        grpc_route = {**base, "protocol_type": "grpc", "request_code": "QueryRoute", "response_code": "40402"}
        assert value(metrics, "rocketmq_rpc_latency_count", **grpc_route, result="success") == 3
        assert value(metrics, "rocketmq_rpc_latency_sum", **grpc_route) > 0
        cluster_info = {
            **base,
            "protocol_type": "grpc",
            "request_code": "GetBrokerClusterInfo",
            "response_code": "20000",
        }
        assert value(metrics, "rocketmq_rpc_latency_count", **cluster_info) == 2
        remoting_route = {
            **base,
            "protocol_type": "remoting",
            "request_code": "get_routeinfo_by_topic",  # RocketMQ's RemotingHelper: the code's name, lower case
            "response_code": "topic_not_exist",
            "result": "success",
        }
        assert value(metrics, "rocketmq_rpc_latency_count", **remoting_route) == 2
        les = buckets(metrics, "rocketmq_rpc_latency", **grpc_route)
        assert list(les) == [*map(str, RPC_LATENCY_BUCKETS_MS), "+Inf"]
        assert les["+Inf"] == 3
        assert all("cluster" not in got for got, _ in metrics["rocketmq_rpc_latency_count"])
        assert proc.alive()


@pytest.mark.timeout(60)
def test_namesrv_metrics_keys_refused_at_start(tmp_path: Path) -> None:
    def fails(text: str) -> str:
        conf = tmp_path / "bad.conf"
        conf.write_text(text)
        args = [str(BIN / "mqnamesrv"), "-p", str(free_port()), "--host", "127.0.0.1", "-c", str(conf)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        return done.stderr.strip().splitlines()[-1]

    assert "metricsExporterType" in fails("metricsExporterType=GRAPHITE\n")
    assert "metricsGrpcExporterTarget" in fails("metricsExporterType=OTLP_GRPC\n")
    assert "metricsLabel item 'nocolon'" in fails("metricsExporterType=PROM\nmetricsLabel=a:b,nocolon\n")


@pytest.mark.timeout(60)
def test_namesrv_settings_name_the_collector(tmp_path: Path) -> None:
    """Clients using the name server as access point learn where to export their own metrics from it too."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("metricsExporterType=OTLP_GRPC\nmetricsGrpcExporterTarget=127.0.0.1:4317\n")
    with namesrv_process(tmp_path, "-c", str(conf)) as (_, addr):
        reply = asyncio.run(telemetry_exchange(addr, producer_settings("t1"), "h@1@0@metrics"))
    assert reply.status.code == d.Code.OK
    metric = reply.settings.metric
    assert metric.on and [(a.host, a.port) for a in metric.endpoints.addresses] == [("127.0.0.1", 4317)]


@pytest.mark.timeout(60)
def test_namesrv_log_exporter(tmp_path: Path) -> None:
    """metricsExporterType=LOG: the families go to the name server's log every metricLoggingExporterIntervalInMills."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("metricsExporterType=LOG\nmetricLoggingExporterIntervalInMills=100\n")
    with namesrv_process(tmp_path, "-c", str(conf)) as (proc, addr):
        with grpc.insecure_channel(addr) as channel:
            assert internal_stub(channel).GetAllTopicList(pb.GetAllTopicListRequest(), timeout=10).code == 20000
        wait_until(
            lambda: "rocketmq_rpc_latency" in proc.log() and "GetAllTopicList" in proc.log(),
            20,
            what="the rpc latency of GetAllTopicList in the log",
        )
