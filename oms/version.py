"""Versions the client reports: the OMS spec it follows and its own version (``x-mq-client-version``).

Kept in one place so headers, ``impl_version()`` and docs agree.
"""

from __future__ import annotations

SPEC_VERSION = "0.3.1"
CLIENT_VERSION = "0.1.0"
