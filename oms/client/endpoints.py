"""Endpoints (scheme + addresses) as a hashable value, convertible to/from v2 protobuf and a gRPC target.

Routes give one ``Endpoints`` per broker; equal values share one channel and one Telemetry stream.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2


def _scheme(host: str) -> int:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return int(definition_pb2.AddressScheme.DOMAIN_NAME)
    return int(definition_pb2.AddressScheme.IPv4 if ip.version == 4 else definition_pb2.AddressScheme.IPv6)


@dataclass(frozen=True)
class Endpoint:
    scheme: int
    addresses: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, addresses: Sequence[tuple[str, int]]) -> Endpoint:
        if not addresses:
            raise ValueError("an endpoint needs at least one address")
        return cls(_scheme(addresses[0][0]), tuple(addresses))

    @classmethod
    def from_pb(cls, pb: definition_pb2.Endpoints) -> Endpoint:
        return cls(int(pb.scheme), tuple((a.host, int(a.port)) for a in pb.addresses))

    def to_pb(self) -> definition_pb2.Endpoints:
        return definition_pb2.Endpoints(
            scheme=self.scheme, addresses=[definition_pb2.Address(host=h, port=p) for h, p in self.addresses]
        )

    @property
    def target(self) -> str:
        """The gRPC target: ``ipv4:h:p,h:p`` for IP lists (pick-first over them), else the first ``host:port``."""
        if self.scheme == definition_pb2.AddressScheme.IPv4:
            return "ipv4:" + ",".join(f"{h}:{p}" for h, p in self.addresses)
        if self.scheme == definition_pb2.AddressScheme.IPv6:
            return "ipv6:" + ",".join(f"[{h}]:{p}" for h, p in self.addresses)
        host, port = self.addresses[0]
        return f"{host}:{port}"

    def __str__(self) -> str:
        return ";".join(f"{h}:{p}" for h, p in self.addresses)
