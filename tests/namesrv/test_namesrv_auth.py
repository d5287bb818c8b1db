"""A name server with ACL on: anonymous or badly signed write RPCs are refused with UNAUTHORIZED and change nothing,
reads stay open, and a broker signing with the cluster credentials registers (and unregisters) as before."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.cluster_auth import ClusterCredentials
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.proto import namesrv_pb2_grpc as pb_grpc
from tests.procs import ServerProcess, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

OK = definition_pb2.Code.OK
UNAUTHORIZED = definition_pb2.Code.UNAUTHORIZED
CREDENTIALS = json.dumps({"accessKey": "clusterAK", "secretKey": "clusterSecret-1"})
GOOD = ClusterCredentials("clusterAK", "clusterSecret-1")
TOPIC = "AuthT"


def _namesrv(tmp: Path, conf: str, name: str = "namesrv") -> tuple[ServerProcess, int]:
    port = free_port()
    conf_path = tmp / f"{name}.conf"
    conf_path.write_text(conf)
    args = [sys.executable, "-m", "namesrv.cli", "-p", str(port), "--host", "127.0.0.1", "-c", str(conf_path)]
    return ServerProcess(args, tmp / f"{name}.log"), port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    """An ACL name server and a broker registered with the cluster credentials, holding topic AuthT."""
    from tests.conftest import BrokerFactory

    tmp = tmp_path_factory.mktemp("nsauth")
    ns, port = _namesrv(tmp, f"aclEnable=true\ninnerClientAuthenticationCredentials={CREDENTIALS}\n")
    ns.start()
    factory = BrokerFactory(tmp)
    try:
        ns.wait_port(port)
        addr = f"127.0.0.1:{port}"
        broker = factory.broker(addr, name="real", options={"innerClientAuthenticationCredentials": CREDENTIALS})
        with grpc.insecure_channel(broker.addr) as ch:
            cfg = admin_pb2.TopicConfig(topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2, perm=6)
            resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg))
            assert resp.status.code == OK
        with grpc.insecure_channel(addr) as ch:
            stub = pb_grpc.NameServerStub(ch)
            wait_until(lambda: _addrs(stub, TOPIC) == {broker.addr}, 30, what="the real broker's route")
        yield ns, addr, broker, factory
    finally:
        factory.stop_all()
        ns.stop()


def _addrs(stub: pb_grpc.NameServerStub, topic: str) -> set[str]:
    resp = stub.GetRouteInfoByTopic(pb.GetRouteInfoRequest(topic=topic), timeout=10)
    if resp.code != OK:
        return set()
    return {a for b in resp.broker_datas for a in b.broker_addrs.values()}


def _rogue(broker_name: str) -> pb.BrokerRegistration:
    return pb.BrokerRegistration(
        cluster_name="DefaultCluster",
        broker_name=broker_name,
        broker_id=0,
        broker_addr="10.66.66.66:8081",
        topic_configs=[pb.TopicConfigData(topic_name=TOPIC, read_queue_nums=8, write_queue_nums=8, perm=6)],
    )


@pytest.mark.timeout(120)
def test_anonymous_and_forged_writes_are_refused_and_the_route_stays(cluster):
    ns, addr, broker, _ = cluster
    stale = GOOD.metadata(now=datetime.now(UTC) - timedelta(hours=2))
    forged = ClusterCredentials("clusterAK", "not-the-secret").metadata()
    wrong_key = ClusterCredentials("someoneAK", "clusterSecret-1").metadata()
    callers = {"anonymous": (), "stale": stale, "forged": forged, "wrong key": wrong_key}
    with grpc.insecure_channel(addr) as ch:
        stub = pb_grpc.NameServerStub(ch)
        for who, metadata in callers.items():
            for name in ("real", "rogue"):  # take over the real broker's name, or add a new one
                result = stub.RegisterBroker(_rogue(name), metadata=metadata, timeout=10)
                assert result.code == UNAUTHORIZED, who
            [session] = list(stub.BrokerSession(iter([_rogue("rogue")]), metadata=metadata, timeout=10))
            assert session.code == UNAUTHORIZED, who
            unreg = pb.UnregisterBrokerRequest(
                cluster_name="DefaultCluster", broker_name="real", broker_id=0, broker_addr=broker.addr
            )
            refused = stub.UnregisterBroker(unreg, metadata=metadata, timeout=10)
            assert refused.code == UNAUTHORIZED, who
            if who == "anonymous":
                assert "innerClientAuthenticationCredentials" in refused.message
            put = stub.PutKVConfig(
                pb.KVConfigRequest(namespace="NS", key="k", value="v"), metadata=metadata, timeout=10
            )
            assert put.code == UNAUTHORIZED, who
            delete = stub.DeleteKVConfig(pb.KVConfigRequest(namespace="NS", key="k"), metadata=metadata, timeout=10)
            assert delete.code == UNAUTHORIZED, who
        # reads stay open, and nothing above changed the route or the KV table
        assert _addrs(stub, TOPIC) == {broker.addr}
        info = stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest(), timeout=10)
        assert set(info.broker_addr_table) == {"real"}
        assert stub.GetKVConfig(pb.KVConfigRequest(namespace="NS", key="k"), timeout=10).code != OK

        # the cluster credentials may write
        signed = stub.PutKVConfig(pb.KVConfigRequest(namespace="NS", key="k", value="v"), metadata=GOOD.metadata())
        assert signed.code == OK
        assert stub.GetKVConfig(pb.KVConfigRequest(namespace="NS", key="k"), timeout=10).value == "v"
        assert stub.DeleteKVConfig(pb.KVConfigRequest(namespace="NS", key="k"), metadata=GOOD.metadata()).code == OK
    assert "write refused" in ns.log()


@pytest.mark.timeout(120)
def test_a_broker_without_the_credentials_cannot_register_and_a_signed_one_leaves_cleanly(cluster):
    _, addr, _, factory = cluster
    intruder = factory.broker(addr, name="intruder")
    with grpc.insecure_channel(addr) as ch:
        stub = pb_grpc.NameServerStub(ch)
        wait_until(lambda: "UNAUTHORIZED" in intruder.log() or "40100" in intruder.log(), 30, what="a refusal")
        assert "intruder" not in stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest(), timeout=10).broker_addr_table
        second = factory.broker(addr, name="second", options={"innerClientAuthenticationCredentials": CREDENTIALS})
        wait_until(
            lambda: "second" in stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest()).broker_addr_table,
            30,
            what="the signed broker's registration",
        )
        assert second.stop() == 0
        assert "unregister failed" not in second.log()
        assert "second" not in stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest(), timeout=10).broker_addr_table
        intruder.stop()


def test_acl_without_credentials_is_a_configuration_error(tmp_path):
    proc, _ = _namesrv(tmp_path, "aclEnable=true\n")
    proc.start()
    assert proc.proc is not None and proc.proc.wait(timeout=30) == 2
    assert "innerClientAuthenticationCredentials" in proc.log()
    proc.stop()


@pytest.mark.timeout(120)
def test_standalone_with_acl_protects_its_embedded_name_server(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: adminAK\n    secretKey: adminSecret1\n    admin: true\n")
    ns_port, port = free_port(), free_port()
    args = [sys.executable, "-m", "broker.cli", "--standalone", "--namesrv-port", str(ns_port), "--port", str(port)]
    args += ["--store", str(tmp_path / "store"), "-o", "aclEnable=true", "-o", f"aclFile={acl}"]
    proc = ServerProcess(args, tmp_path / "standalone.log").start()
    try:
        proc.wait_port(port)
        with grpc.insecure_channel(f"127.0.0.1:{ns_port}") as ch:
            stub = pb_grpc.NameServerStub(ch)
            wait_until(
                lambda: "broker-a" in stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest()).broker_addr_table,
                30,
                what="the standalone broker's own registration",
            )
            assert stub.RegisterBroker(_rogue("rogue"), timeout=10).code == UNAUTHORIZED
            assert set(stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest()).broker_addr_table) == {"broker-a"}
    finally:
        proc.stop()
