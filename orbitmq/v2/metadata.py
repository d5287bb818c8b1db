"""Request metadata of a v2 call (x-mq-client-id, namespace, language, authorization...) as a dataclass.

The official clients send these headers on every RPC, including the Telemetry stream open (protocol §1.2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from orbitmq.errors import MQError

CLIENT_ID = "x-mq-client-id"
NAMESPACE = "x-mq-namespace"
LANGUAGE = "x-mq-language"
PROTOCOL = "x-mq-protocol"
CLIENT_VERSION = "x-mq-client-version"
DATE_TIME = "x-mq-date-time"
REQUEST_ID = "x-mq-request-id"
SESSION_TOKEN = "x-mq-session-token"
AUTHORIZATION = "authorization"


@dataclass(frozen=True)
class ClientMeta:
    """What the client told us about itself in the call's metadata, plus the peer address."""

    client_id: str = ""
    namespace: str = ""
    language: str = ""
    protocol: str = ""
    client_version: str = ""
    date_time: str = ""
    request_id: str = ""
    authorization: str = ""
    session_token: str = ""
    peer: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def require_client_id(self) -> str:
        """The client id, or CLIENT_ID_REQUIRED as the reference proxy answers for a blank one."""
        if not self.client_id.strip():
            raise MQError(definition_pb2.Code.CLIENT_ID_REQUIRED, f"metadata {CLIENT_ID!r} is required")
        return self.client_id

    @property
    def peer_address(self) -> str:
        """``host:port`` of the peer, without gRPC's ``ipv4:``/``ipv6:`` scheme (what mqadmin shows as Addr)."""
        for prefix in ("ipv4:", "ipv6:"):
            if self.peer.startswith(prefix):
                return self.peer[len(prefix) :].replace("%5B", "[").replace("%5D", "]")
        return self.peer

    @property
    def peer_host(self) -> str:
        """The peer's host from a gRPC peer string such as ``ipv4:127.0.0.1:5555``."""
        peer = self.peer
        for prefix in ("ipv4:", "ipv6:"):
            if peer.startswith(prefix):
                peer = peer[len(prefix) :]
                break
        host = peer.rsplit(":", 1)[0] if ":" in peer else peer
        return host.strip("[]").replace("%5B", "").replace("%5D", "")


def meta_from_pairs(pairs: Iterable[tuple[str, Any]], peer: str = "") -> ClientMeta:
    headers: dict[str, str] = {}
    for key, value in pairs:
        if isinstance(value, bytes):
            # binary headers (-bin) are not used by the v2 clients; keep them readable anyway
            value = value.decode("utf-8", "replace")
        headers[key.lower()] = str(value)
    return ClientMeta(
        client_id=headers.get(CLIENT_ID, ""),
        namespace=headers.get(NAMESPACE, ""),
        language=headers.get(LANGUAGE, ""),
        protocol=headers.get(PROTOCOL, ""),
        client_version=headers.get(CLIENT_VERSION, ""),
        date_time=headers.get(DATE_TIME, ""),
        request_id=headers.get(REQUEST_ID, ""),
        authorization=headers.get(AUTHORIZATION, ""),
        session_token=headers.get(SESSION_TOKEN, ""),
        peer=peer,
        headers=headers,
    )


def client_meta(context: Any) -> ClientMeta:
    """Read the metadata of a ``grpc.aio.ServicerContext`` (or a sync one) into a ``ClientMeta``."""
    pairs = context.invocation_metadata() or ()
    try:
        peer = str(context.peer() or "")
    except Exception:
        peer = ""
    return meta_from_pairs(((m[0], m[1]) for m in pairs), peer)
