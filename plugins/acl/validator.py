"""Plain ACL checks with RocketMQ 4's ``PlainPermissionManager`` semantics, over v2 request headers.

Order: a caller in ``globalWhiteRemoteAddresses`` passes without credentials; otherwise the access key must be
known; a caller matching the account's ``whiteRemoteAddress`` is trusted (no signature, no permission check);
otherwise the signature must verify, admin-only actions need ``admin: true``, and each resource needs its
permission: the account's per-topic / per-group entry, else its default (``DENY`` when unset). Groups are also
addressed through their ``%RETRY%`` topic, as RocketMQ does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from common.errors import Code, MQError
from common.v2.metadata import AUTHORIZATION, DATE_TIME
from common.v2.signature import AUTH_ALGORITHM, parse_authorization, verify
from plugins.acl.config import Account, AclConfig, Perm, check_permission
from plugins.acl.watcher import AclFileWatcher

RETRY_PREFIX = "%RETRY%"


class ResourceKind(StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"


class Action(StrEnum):
    PUB = "PUB"
    SUB = "SUB"
    PUB_SUB = "PUB_SUB"  # either one suffices (route queries)
    ADMIN = "ADMIN"


_NEEDED = {Action.PUB: Perm.PUB, Action.SUB: Perm.SUB, Action.PUB_SUB: Perm.ANY}


@dataclass(frozen=True)
class AccessContext:
    """Who passed authentication and how."""

    access_key: str
    account: Account | None = None
    global_white: bool = False  # from a globally white-listed address, no credentials checked
    trusted_address: bool = False  # matched the account's whiteRemoteAddress: permissions are not checked


class PlainAccessValidator:
    def __init__(self, source: AclFileWatcher | AclConfig) -> None:
        self._source = source

    @classmethod
    def from_file(cls, path: Path) -> PlainAccessValidator:
        return cls(AclFileWatcher(path))

    @property
    def config(self) -> AclConfig:
        return self._source.current() if isinstance(self._source, AclFileWatcher) else self._source

    def authenticate(self, headers: Mapping[str, str], remote_ip: str) -> AccessContext:
        config = self.config
        if any(p.matches(remote_ip) for p in config.global_white_remote_addresses):
            return AccessContext("", global_white=True)
        header = headers.get(AUTHORIZATION, "")
        if not header:
            raise MQError(Code.UNAUTHORIZED, "no credentials: the authorization header is missing")
        parsed = parse_authorization(header)
        if parsed.algorithm != AUTH_ALGORITHM:
            raise MQError(Code.UNAUTHORIZED, f"authorization algorithm {parsed.algorithm!r} is not {AUTH_ALGORITHM}")
        if not parsed.access_key:
            raise MQError(Code.UNAUTHORIZED, "no credentials: the access key is empty")
        account = config.accounts.get(parsed.access_key)
        if account is None:
            raise MQError(Code.UNAUTHORIZED, f"access key {parsed.access_key!r} is not known")
        if account.white_remote_address.matches(remote_ip):
            return AccessContext(account.access_key, account, trusted_address=True)
        date_time = headers.get(DATE_TIME, "")
        if not date_time:
            raise MQError(Code.UNAUTHORIZED, f"header {DATE_TIME!r} is missing: it is what the signature signs")
        if not verify(account.secret_key, date_time, parsed.signature_hex):
            raise MQError(Code.UNAUTHORIZED, f"signature check failed for access key {account.access_key!r}")
        return AccessContext(account.access_key, account)

    def authorize(self, ctx: AccessContext, kind: ResourceKind, resource: str, action: Action) -> None:
        if ctx.global_white or ctx.trusted_address:
            return
        account = ctx.account
        if account is None:
            raise MQError(Code.FORBIDDEN, f"{kind.lower()} {resource!r}: the caller is not authenticated")
        if action is Action.ADMIN:
            if not account.admin:
                raise MQError(Code.FORBIDDEN, f"account {account.access_key!r} needs admin permission for this request")
            return
        needed = _NEEDED[action]
        if kind is ResourceKind.TOPIC and resource.startswith(RETRY_PREFIX):
            kind, resource = ResourceKind.GROUP, resource[len(RETRY_PREFIX) :]
        if account.admin and not account.topic_perms and not account.group_perms:
            return  # RocketMQ: an admin without explicit permissions may do everything
        if kind is ResourceKind.GROUP:
            owned = account.group_perms.get(resource, account.default_group_perm)
        else:
            owned = account.topic_perms.get(resource, account.default_topic_perm)
        if not check_permission(needed, owned):
            raise MQError(
                Code.FORBIDDEN,
                f"account {account.access_key!r} has no {action.value} permission on {kind.lower()} {resource!r}",
            )
