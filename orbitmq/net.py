"""Listener addresses: the ``host:port`` a gRPC server binds and whether a bind address is loopback-only.

Both servers use it to bind and to warn when they listen beyond this machine without ACL.
"""

from __future__ import annotations

import ipaddress

EVERY_INTERFACE = "0.0.0.0"
LOOPBACK = "127.0.0.1"


def bind_target(host: str, port: int) -> str:
    """``host:port`` as gRPC takes it; an IPv6 literal gets brackets (``[::1]:9876``)."""
    host = host.strip() or EVERY_INTERFACE
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """True only for addresses that cannot be reached from another machine (127.0.0.0/8, ::1, localhost)."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name may resolve to anything: treat it as reachable
