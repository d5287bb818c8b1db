"""Parsing the access point URL ``oms:<driver>://[account@]host:port[;host:port...]/namespace``.

The hosts are always used (no ``OMS_RMQ_DIRECT_NAME_SRV`` gate); with none, ``NAMESRV_ADDR`` supplies them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from oms.errors import OMSRuntimeException
from orbitmq.errors import Code

_URL = re.compile(r"^oms:(?P<driver>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(?P<port>\d{1,5})$")
NAMESRV_ENV = "NAMESRV_ADDR"


@dataclass(frozen=True)
class AccessPointURL:
    driver: str
    endpoints: tuple[tuple[str, int], ...]  # (host, port); IPv6 hosts without brackets
    namespace: str
    account: str | None = None

    @property
    def addresses(self) -> str:
        """``host:port;host:port`` as RocketMQ spells a name server list."""
        return ";".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.endpoints)


def _illegal(url: str, why: str) -> OMSRuntimeException:
    return OMSRuntimeException(Code.ILLEGAL_ACCESS_POINT, f"access point URL {url!r}: {why}")


def parse_hosts(text: str, source: str) -> tuple[tuple[str, int], ...]:
    """``h:p;h:p`` (``,`` also separates, as in OMS Java) -> ((h, p), ...)."""
    out: list[tuple[str, int]] = []
    for item in re.split(r"[;,]", text):
        item = item.strip()
        if not item:
            continue
        match = _HOST_PORT.match(item)
        if match is None:
            raise _illegal(source, f"{item!r} is not host:port")
        port = int(match["port"])
        if not 0 < port < 65536:
            raise _illegal(source, f"port {port} is out of range")
        out.append((match["host"].strip("[]"), port))
    return tuple(out)


def parse_access_point(url: str, environ: dict[str, str] | None = None) -> AccessPointURL:
    """Parse ``url``; ILLEGAL_ACCESS_POINT naming the problem when it is malformed or has no host at all."""
    match = _URL.match(url.strip())
    if match is None:
        raise _illegal(url, "expected oms:<driver>://[account@]host:port[;host:port]/namespace")
    rest = match["rest"]
    authority, _, namespace = rest.partition("/")
    account: str | None = None
    if "@" in authority:
        account, _, authority = authority.rpartition("@")
        account = account or None
    endpoints = parse_hosts(authority, url)
    if not endpoints:
        env = os.environ if environ is None else environ
        fallback = env.get(NAMESRV_ENV, "").strip()
        if not fallback:
            raise _illegal(url, f"no host in the URL and {NAMESRV_ENV} is not set")
        endpoints = parse_hosts(fallback, f"{NAMESRV_ENV}={fallback}")
    if "/" in namespace:
        raise _illegal(url, f"namespace {namespace!r} contains '/'")
    return AccessPointURL(match["driver"], endpoints, namespace, account)
