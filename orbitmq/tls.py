"""TLS for the gRPC listeners and the servers' own outgoing calls: config keys shared by broker and name server.

Key names follow RocketMQ's ``tls.server.*`` / ``tls.client.*`` settings in camelCase (``tlsServerCertPath`` for
``tls.server.certPath``), because config fields are identifiers. Files are read at start; errors name the key.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import grpc

from orbitmq.config import ConfigError


class ClientAuth(StrEnum):
    """RocketMQ's ``tls.server.need.client.auth``; gRPC Python can only request-and-require or not request."""

    NONE = "none"
    REQUIRE = "require"


def _read(key: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path!r}: {exc.strerror or exc}") from exc
    if not data.strip():
        raise ConfigError(f"{key}: {path!r} is empty")
    return data


@dataclass
class TlsConfig:
    """TLS keys of a server process (mixed into ``BrokerConfig`` and ``NamesrvConfig``).

    The listener serves TLS when ``tlsServerCertPath`` and ``tlsServerKeyPath`` are set; ``tlsEnable`` makes the
    process's own calls (broker -> name server registration, name server -> broker recall) use TLS.
    """

    tlsServerCertPath: str = ""  # PEM certificate chain of this server
    tlsServerKeyPath: str = ""  # PEM private key (unencrypted)
    tlsServerTrustCertPath: str = ""  # PEM CA bundle that client certificates must chain to
    tlsServerNeedClientAuth: str = ClientAuth.NONE.value  # none | require
    tlsEnable: bool = False  # outgoing calls to other servers use TLS
    tlsClientTrustCertPath: str = ""  # PEM CA bundle to verify the other servers (empty = the system roots)
    tlsClientCertPath: str = ""  # PEM client certificate, for servers that require one
    tlsClientKeyPath: str = ""  # PEM key of tlsClientCertPath

    @property
    def tls_server_enabled(self) -> bool:
        return bool(self.tlsServerCertPath.strip() or self.tlsServerKeyPath.strip())

    def client_auth(self) -> ClientAuth:
        try:
            return ClientAuth(self.tlsServerNeedClientAuth.strip().lower())
        except ValueError:
            raise ConfigError(
                f"tlsServerNeedClientAuth {self.tlsServerNeedClientAuth!r} is not one of none, require "
                "(gRPC cannot ask for an optional client certificate)"
            ) from None

    def _server_trust(self) -> tuple[ClientAuth, str]:
        """The listener's client-auth mode and CA bundle path, checked; ConfigError for a half setup."""
        if not self.tlsServerCertPath.strip() or not self.tlsServerKeyPath.strip():
            raise ConfigError("TLS needs both tlsServerCertPath and tlsServerKeyPath")
        auth = self.client_auth()
        trust = self.tlsServerTrustCertPath.strip()
        if auth is ClientAuth.REQUIRE and not trust:
            raise ConfigError("tlsServerNeedClientAuth=require needs tlsServerTrustCertPath (the clients' CA)")
        return auth, trust

    def server_credentials(self) -> grpc.ServerCredentials | None:
        """Credentials of the TLS listener, None for a plaintext one; ConfigError for a half or unreadable setup."""
        if not self.tls_server_enabled:
            return None
        auth, trust = self._server_trust()
        pair = (_read("tlsServerKeyPath", self.tlsServerKeyPath), _read("tlsServerCertPath", self.tlsServerCertPath))
        return grpc.ssl_server_credentials(
            [pair],
            root_certificates=_read("tlsServerTrustCertPath", trust) if trust else None,
            require_client_auth=auth is ClientAuth.REQUIRE,
        )

    def server_ssl_context(self) -> ssl.SSLContext | None:
        """The same listener setup for the HTTP/2 server (orbitmq/h2grpc): TLS 1.2+, ALPN h2; None for plaintext."""
        if not self.tls_server_enabled:
            return None
        auth, trust = self._server_trust()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # HTTP/2 forbids older versions (RFC 9113 §9.2)
        context.set_alpn_protocols(["h2"])
        _read("tlsServerCertPath", self.tlsServerCertPath)  # the same errors as server_credentials for a bad path
        _read("tlsServerKeyPath", self.tlsServerKeyPath)
        try:
            context.load_cert_chain(self.tlsServerCertPath.strip(), self.tlsServerKeyPath.strip())
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"tlsServerCertPath/tlsServerKeyPath: not a PEM certificate and its key: {exc}") from exc
        if trust:
            _read("tlsServerTrustCertPath", trust)
            try:
                context.load_verify_locations(cafile=trust)
            except (ssl.SSLError, OSError) as exc:
                raise ConfigError(f"tlsServerTrustCertPath: not a PEM CA bundle: {exc}") from exc
        context.verify_mode = ssl.CERT_REQUIRED if auth is ClientAuth.REQUIRE else ssl.CERT_NONE
        return context

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """Credentials of this process's outgoing calls, None when ``tlsEnable`` is off."""
        if not self.tlsEnable:
            return None
        return client_credentials(
            self.tlsClientTrustCertPath,
            self.tlsClientCertPath,
            self.tlsClientKeyPath,
            keys=("tlsClientTrustCertPath", "tlsClientCertPath", "tlsClientKeyPath"),
        )

    def validate_tls(self) -> None:
        """Read every configured file now, so a bad setup fails at start (exit 2) and not at the first call."""
        self.server_credentials()
        self.channel_credentials()


def client_credentials(
    trust_cert_path: str = "",
    cert_path: str = "",
    key_path: str = "",
    keys: tuple[str, str, str] = ("trust_cert_path", "cert_path", "key_path"),
) -> grpc.ChannelCredentials:
    """TLS channel credentials: a CA bundle (empty = the system roots) and an optional client certificate.

    ``keys`` are the caller's names of the three settings, for error messages.
    """
    trust_key, cert_key, key_key = keys
    if bool(cert_path.strip()) != bool(key_path.strip()):
        raise ConfigError(f"a client certificate needs both {cert_key} and {key_key}")
    return grpc.ssl_channel_credentials(
        root_certificates=_read(trust_key, trust_cert_path) if trust_cert_path.strip() else None,
        private_key=_read(key_key, key_path) if key_path.strip() else None,
        certificate_chain=_read(cert_key, cert_path) if cert_path.strip() else None,
    )


class ListenError(OSError):
    """A listener could not bind: the message names the address and the likely cause, for one start-up line."""


def add_port(server: Any, target: str, credentials: grpc.ServerCredentials | ssl.SSLContext | None) -> int:
    """Bind ``target`` with TLS when ``credentials`` is given (grpc's for grpc.aio.Server, an ssl.SSLContext for
    orbitmq.h2grpc.H2Server); returns the port. ``ListenError`` when it cannot."""
    cause: RuntimeError | None = None
    try:
        port = server.add_insecure_port(target) if credentials is None else server.add_secure_port(target, credentials)
    except RuntimeError as exc:  # grpc's "Failed to bind to address ...; set GRPC_VERBOSITY=debug ..."
        port, cause = 0, exc
    if not port:
        raise ListenError(
            f"cannot listen on {target}: the port is in use, or the address is not one of this machine's"
        ) from cause
    return int(port)


def channel(
    target: str, credentials: grpc.ChannelCredentials | None, options: list[tuple[str, int]] | None = None
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target``, over TLS when ``credentials`` is given."""
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, credentials, options=options)
