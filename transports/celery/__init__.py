"""Celery/kombu transport on OrbitMQ: importing this package registers ``rocketmq://`` with kombu.

Without the import, ``broker_transport = "transports.celery.transport:Transport"`` selects it (docs/celery.md).
"""

from __future__ import annotations

TRANSPORT_PATH = "transports.celery.transport:Transport"
SCHEME = "rocketmq"


def register(scheme: str = SCHEME) -> None:
    """Map ``<scheme>://`` URLs to our transport in kombu's alias table (idempotent)."""
    from kombu.transport import TRANSPORT_ALIASES

    TRANSPORT_ALIASES[scheme] = TRANSPORT_PATH


try:
    import kombu  # noqa: F401  # the extra "celery" may not be installed
except ImportError:  # pragma: no cover - without kombu there is nothing to register with
    pass
else:
    register()
