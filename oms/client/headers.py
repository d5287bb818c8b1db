"""The metadata headers of every v2 call: client id, language, protocol, namespace, request id, signature.

Signing (x-mq-date-time + authorization) is ``orbitmq.v2.signature.signing_metadata``, used when credentials exist.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from oms.errors import OMSSecurityException
from oms.version import CLIENT_VERSION
from orbitmq.errors import Code
from orbitmq.v2 import metadata as md

Signer = Callable[..., list[tuple[str, str]]]


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    session_token: str | None = None


def _load_signer() -> Signer:
    # Imported lazily: the module is optional until a client actually has credentials.
    try:
        from orbitmq.v2.signature import signing_metadata
    except ImportError as exc:
        raise OMSSecurityException(
            Code.UNAUTHORIZED, f"credentials were given but request signing is unavailable: {exc}"
        ) from exc
    return signing_metadata


class HeaderBuilder:
    """Builds the metadata of one client object's calls (one ``x-mq-client-id`` per client)."""

    def __init__(self, client_id: str, namespace: str = "", credentials: Credentials | None = None) -> None:
        self.client_id = client_id
        self.namespace = namespace
        self.credentials = credentials
        self._static: tuple[tuple[str, str], ...] = (
            (md.CLIENT_ID, client_id),
            (md.LANGUAGE, "PYTHON"),
            (md.PROTOCOL, "v2"),
            (md.CLIENT_VERSION, CLIENT_VERSION),
            (md.NAMESPACE, namespace),
        )
        self._signer: Signer | None = _load_signer() if credentials is not None else None
        # Request ids in a UUID's shape: a random head drawn once, a counter for the last group. A uuid4 per call
        # cost a getrandom() system call, which gives up the GIL and waits to take it back on a busy client.
        self._request_head = str(uuid.uuid4())[:24]
        self._request_counter = itertools.count()

    def build(self) -> tuple[tuple[str, str], ...]:
        request_id = f"{self._request_head}{next(self._request_counter) & 0xFFFFFFFFFFFF:012x}"
        headers = (*self._static, (md.REQUEST_ID, request_id))
        creds = self.credentials
        if creds is None or self._signer is None:
            return headers
        signed = self._signer(creds.access_key, creds.secret_key, creds.session_token)
        return headers + tuple((str(k), str(v)) for k, v in signed)
