"""Where the servers listen: ``mqbroker --standalone`` binds its broker and embedded name server to 127.0.0.1 unless
told otherwise; ``--host``/``bindAddress`` and ``--namesrv-host`` choose; a non-loopback bind with ACL off warns.

The bound addresses are read from the kernel's socket tables (``/proc/net/tcp*``), not inferred from logs."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest

from tests.procs import ServerProcess, free_port

pytestmark = pytest.mark.integration
WARNING = "listening beyond this machine with ACL off"
EVERY_INTERFACE = ({"0.0.0.0"}, {"::"})  # gRPC binds 0.0.0.0 as a dual-stack [::] socket where IPv6 exists


def listen_addresses(port: int) -> set[str]:
    """Local addresses with a socket in LISTEN state on ``port`` (an IPv4-mapped IPv6 socket as its IPv4 address)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:
                continue
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(bytes(reversed(bytes.fromhex(addr_hex[i : i + 8]))) for i in range(0, len(addr_hex), 8))
            address = ipaddress.ip_address(raw)
            mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
            found.add(str(mapped or address))
    return found


def _standalone(tmp_path: Path, *extra: str) -> tuple[ServerProcess, int, int]:
    ns_port, port = free_port(), free_port()
    args = [sys.executable, "-m", "broker.cli", "--standalone", "--namesrv-port", str(ns_port), "--port", str(port)]
    args += ["--store", str(tmp_path / "store"), "-o", "registerBrokerIntervalMs=1000", *extra]
    proc = ServerProcess(args, tmp_path / "standalone.log").start()
    return proc, port, ns_port


@pytest.mark.timeout(120)
def test_standalone_binds_loopback_by_default(tmp_path):
    proc, port, ns_port = _standalone(tmp_path)
    try:
        proc.wait_port(port)
        proc.wait_port(ns_port)
        assert listen_addresses(port) == {"127.0.0.1"}
        assert listen_addresses(ns_port) == {"127.0.0.1"}
    finally:
        proc.stop()
    assert WARNING not in proc.log()


@pytest.mark.timeout(120)
def test_host_flags_choose_each_listener_and_an_open_bind_without_acl_warns(tmp_path):
    proc, port, ns_port = _standalone(tmp_path, "--host", "0.0.0.0", "--namesrv-host", "127.0.0.1")
    try:
        proc.wait_port(port)
        proc.wait_port(ns_port)
        assert listen_addresses(port) in EVERY_INTERFACE
        assert listen_addresses(ns_port) == {"127.0.0.1"}
    finally:
        proc.stop()
    assert proc.log().count(WARNING) == 1  # the broker's listener only


@pytest.mark.timeout(120)
def test_bind_address_from_the_config_and_the_name_server_warning(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("bindAddress=127.0.0.2\n")
    port = free_port()
    args = [sys.executable, "-m", "broker.cli", "-c", str(conf), "--port", str(port), "--store", str(tmp_path / "s")]
    broker = ServerProcess(args, tmp_path / "broker.log").start()
    ns_port = free_port()
    namesrv = ServerProcess(
        [sys.executable, "-m", "namesrv.cli", "-p", str(ns_port), "--host", "0.0.0.0"], tmp_path / "ns.log"
    ).start()
    try:
        broker.wait_port(port, host="127.0.0.2")
        namesrv.wait_port(ns_port)
        assert listen_addresses(port) == {"127.0.0.2"}
        assert listen_addresses(ns_port) in EVERY_INTERFACE
    finally:
        broker.stop()
        namesrv.stop()
    assert WARNING not in broker.log()
    assert WARNING in namesrv.log() and "rewrite routes" in namesrv.log()
