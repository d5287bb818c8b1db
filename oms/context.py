"""The seam between an access point and the clients it creates: all a producer, consumer or resource manager asks of it.

Clients depend on this protocol, never on ``oms.access_point`` (which imports them to create them).
"""

from __future__ import annotations

from typing import Any, Protocol

from oms.client.core import Runtime
from oms.plugins import ClientPluginManager


class Lifecycle(Protocol):
    """Something with idempotent ``startup()``/``shutdown()`` (access points, producers, consumers)."""

    def startup(self) -> Any: ...

    def shutdown(self) -> None: ...


class ClientContext(Protocol):
    """What a client uses of the access point that created it (``MessagingAccessPoint`` is the implementation)."""

    @property
    def namespace(self) -> str:
        """The namespace resource names are qualified with (``REGION``, or the URL's path)."""
        ...

    @property
    def plugin_manager(self) -> ClientPluginManager:
        """The access point's plugins (entry points and registrations), called before a client's own interceptors."""
        ...

    def born_host(self) -> str:
        """The local address this process reaches the cluster from (born host, user agent)."""
        ...

    def start_client(self, client: Lifecycle) -> Runtime:
        """Start the access point if needed and give ``client`` the shared loop and channels."""
        ...

    def forget_client(self, client: Lifecycle) -> None:
        """``client`` shut down by itself: the access point's shutdown no longer has to stop it."""
        ...
