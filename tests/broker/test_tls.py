"""TLS on every gRPC listener: a standalone broker (broker + embedded name server, registration over TLS) serves the
official client (``tls_enable=True``) and ``oms`` (``tls_enable=``, ``tls_trust_cert_path=``); a name server that
requires client certificates refuses a client without one; plaintext and untrusted clients get nowhere.

Certificates are made at test time with the openssl CLI (``tests/certs.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

import oms
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.proto import namesrv_pb2_grpc as pb_grpc
from tests.certs import CertificateSet, make_certificates
from tests.procs import ServerProcess, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.integration
OK = 20000


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> CertificateSet:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_standalone(tmp_path_factory, certs):
    tmp = tmp_path_factory.mktemp("tls")
    ns_port, port = free_port(), free_port()
    options = {
        "tlsServerCertPath": certs.server_cert,
        "tlsServerKeyPath": certs.server_key,
        "tlsEnable": "true",  # the broker's registration with its embedded name server
        "tlsClientTrustCertPath": certs.ca,
        "registerBrokerIntervalMs": "1000",
    }
    args = [sys.executable, "-m", "broker.cli", "--standalone", "--namesrv-port", str(ns_port), "--port", str(port)]
    args += ["--store", str(tmp / "store")]
    for key, value in options.items():
        args += ["-o", f"{key}={value}"]
    proc = ServerProcess(args, tmp / "standalone.log").start()
    try:
        proc.wait_port(port)
        proc.wait_port(ns_port)
        # the ports open before the broker's first registration: routes through the name server need it
        wait_until(lambda: "OrbitMQ standalone ready" in proc.log(), 30, what="the broker registered")
        yield proc, f"127.0.0.1:{port}", f"127.0.0.1:{ns_port}"
    finally:
        proc.stop()


def _secure_call(addr: str, credentials: grpc.ChannelCredentials) -> int:
    with grpc.secure_channel(addr, credentials) as ch:
        return int(pb_grpc.NameServerStub(ch).GetAllTopicList(pb.GetAllTopicListRequest(), timeout=10).code)


@pytest.mark.timeout(120)
def test_oms_over_tls_through_the_name_server_and_the_broker(tls_standalone, certs):
    proc, broker_addr, ns_addr = tls_standalone
    # generous timeouts: a TLS handshake per connection is slow on a loaded 2-core machine
    trusted = {"tls_enable": True, "tls_trust_cert_path": str(certs.ca), "operation_timeout": 15000}
    for access in (ns_addr, broker_addr):
        with (
            oms.get_messaging_access_point(f"oms:rocketmq://{access}/", **trusted) as ap,
            ap.create_producer() as producer,
        ):
            assert producer.send(oms.BytesMessage(f"tls via {access}".encode(), "TlsT")).message_id
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{ns_addr}/", **trusted) as ap,
        ap.create_pull_consumer(consumer_id="TlsG", consume_from_where="first") as pc,
    ):
        pc.attach_queue("TlsT")
        got = {m.body for m in (pc.receive(15) for _ in range(2)) if m is not None}
        assert got == {f"tls via {ns_addr}".encode(), f"tls via {broker_addr}".encode()}

    # plaintext and a client trusting another CA never reach a broker
    plain = {"operation_timeout": 2000}
    untrusted = {**trusted, "tls_trust_cert_path": str(certs.other_ca), "operation_timeout": 2000}
    for attrs in (plain, untrusted):
        with (
            oms.get_messaging_access_point(f"oms:rocketmq://{broker_addr}/", **attrs) as ap,
            ap.create_producer() as producer,
            pytest.raises(oms.OMSRuntimeException),
        ):
            producer.send(oms.BytesMessage(b"never", "TlsT"))
    assert "tls=True" in proc.log()


@pytest.mark.timeout(120)
def test_the_official_client_with_tls_enable(tls_standalone, certs, tmp_path):
    _, broker_addr, ns_addr = tls_standalone
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(certs.ca)}
    script = Path(__file__).with_name("tls_official_client.py")
    for endpoint, group in ((ns_addr, "TlsOfficialNs"), (broker_addr, "TlsOfficialBroker")):
        done = subprocess.run(
            [sys.executable, str(script), endpoint, "TlsOfficialT", group],
            env=env, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode == 0 and "received over-tls" in done.stdout, done.stdout + done.stderr


@pytest.mark.timeout(120)
def test_required_client_certificates(tmp_path, certs):
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"tlsServerCertPath={certs.server_cert}\ntlsServerKeyPath={certs.server_key}\n"
        f"tlsServerTrustCertPath={certs.ca}\ntlsServerNeedClientAuth=require\n"
    )
    args = [sys.executable, "-m", "namesrv.cli", "-p", str(port), "--host", "127.0.0.1", "-c", str(conf)]
    proc = ServerProcess(args, tmp_path / "namesrv.log").start()
    addr = f"127.0.0.1:{port}"
    ca = certs.ca.read_bytes()
    try:
        proc.wait_port(port)
        with_cert = grpc.ssl_channel_credentials(ca, certs.client_key.read_bytes(), certs.client_cert.read_bytes())
        assert _secure_call(addr, with_cert) == OK
        with pytest.raises(grpc.RpcError) as no_cert:
            _secure_call(addr, grpc.ssl_channel_credentials(ca))
        assert no_cert.value.code() == grpc.StatusCode.UNAVAILABLE
        with grpc.insecure_channel(addr) as ch, pytest.raises(grpc.RpcError):
            pb_grpc.NameServerStub(ch).GetAllTopicList(pb.GetAllTopicListRequest(), timeout=10)
    finally:
        proc.stop()


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ("tlsServerCertPath={cert}\n", "tlsServerKeyPath"),
        (
            "tlsServerCertPath={cert}\ntlsServerKeyPath={key}\ntlsServerNeedClientAuth=require\n",
            "tlsServerTrustCertPath",
        ),
        ("tlsServerCertPath={cert}\ntlsServerKeyPath=/nonexistent/key.pem\n", "/nonexistent/key.pem"),
        ("tlsServerCertPath={cert}\ntlsServerKeyPath={key}\ntlsServerNeedClientAuth=optional\n", "none, require"),
    ],
)
def test_bad_tls_settings_refuse_to_start(tmp_path, certs, conf, words):
    path = tmp_path / "namesrv.conf"
    path.write_text(conf.format(cert=certs.server_cert, key=certs.server_key))
    args = [sys.executable, "-m", "namesrv.cli", "-p", str(free_port()), "--host", "127.0.0.1", "-c", str(path)]
    proc = ServerProcess(args, tmp_path / "namesrv.log").start()
    try:
        assert proc.proc is not None and proc.proc.wait(timeout=30) == 2
        assert words in proc.log()
    finally:
        proc.stop()
