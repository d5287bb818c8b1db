"""Plain ACL checks with RocketMQ 4's ``PlainPermissionManager`` semantics over v2 request headers.

Authentication (``authenticate``), in RocketMQ's order; any refusal is UNAUTHORIZED:
  1. a caller in ``globalWhiteRemoteAddresses`` passes with no credentials at all (``global_white``);
  2. otherwise the ``authorization`` header and ``x-mq-date-time`` must be present, the header well formed
     with algorithm ``MQv2-HMAC-SHA1`` and a non-empty, known access key;
  3. a caller matching the account's ``whiteRemoteAddress`` is trusted: no signature check and no permission
     check (``trusted_address``). That list *grants* trust; it does not restrict where the account may connect
     from: another address just has to sign correctly (RocketMQ 4 ``validate`` / the user guide's step 2);
  4. otherwise the signature must verify (constant-time, no clock-skew check, as the reference proxy).

Authorization (``authorize``); any refusal is FORBIDDEN naming the account, the resource and the permission:
  - ``Action.ADMIN`` (create/delete topic or group, broker config) needs ``admin: true``; nothing else is checked;
  - publishing to ``RMQ_SYS_TRACE_TOPIC`` is always allowed (RocketMQ skips the checks for trace data);
  - an admin account listing no ``topicPerms`` and no ``groupPerms`` may do everything; an admin that lists any
    is checked like everyone else (RocketMQ's ``checkPerm``: ``ownedPermMap == null && isAdmin``);
  - the explicit ``name=PERM`` entry wins over the default; no entry means ``defaultTopicPerm`` /
    ``defaultGroupPerm`` (DENY when unset). DENY refuses; ``PUB|SUB`` grants both; ``Action.PUB_SUB`` (route
    queries) needs either, as RocketMQ's ``ANY``;
  - ``%RETRY%g`` and ``%DLQ%g`` topics without their own topicPerms entry are group ``g``'s resource: its group
    permission applies and sending to them needs SUB, as RocketMQ 4 maps a send to a retry topic (consumers put
    messages back; groups normally hold SUB). RocketMQ maps only ``%RETRY%``; ``%DLQ%`` is mapped here too so a
    group's members may read its dead letters.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType

from orbitmq.errors import Code, MQError
from orbitmq.topics import group_of_topic
from orbitmq.v2.metadata import AUTHORIZATION, DATE_TIME
from orbitmq.v2.signature import AUTH_ALGORITHM, parse_authorization, verify
from plugins.acl.config import Account, AclConfig, Perm, check_permission
from plugins.acl.watcher import CHECK_INTERVAL_S, AclFileWatcher

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
_SHOWN = 64  # names in messages come from the caller; quote only their start


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


class ResourceKind(StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"


class Action(StrEnum):
    PUB = "PUB"
    SUB = "SUB"
    PUB_SUB = "PUB_SUB"  # either one suffices (route queries): RocketMQ's Permission.ANY
    ADMIN = "ADMIN"  # admin-only operations: create/update/delete topics and groups, broker config


_NEEDED = {Action.PUB: Perm.PUB, Action.SUB: Perm.SUB, Action.PUB_SUB: Perm.ANY}


@dataclass(frozen=True)
class AccessContext:
    """Who passed authentication and how; hand it back to ``authorize`` for each resource of the request."""

    access_key: str  # "" for a globally white-listed caller
    account: Account | None = None  # the account as configured when the request was authenticated
    global_white: bool = False  # from a globally white-listed address: no credentials, no permission checks
    trusted_address: bool = False  # matched the account's whiteRemoteAddress: no signature, no permission checks


class PlainAccessValidator:
    """Authenticates v2 requests and authorizes their resources against a ``plain_acl.yml``."""

    def __init__(self, source: AclFileWatcher | AclConfig) -> None:
        self._source = source

    @classmethod
    def from_file(cls, path: Path, check_interval_s: float = CHECK_INTERVAL_S) -> PlainAccessValidator:
        """Load ``path`` (raises ``AclConfigError`` if it is unusable) and reload it when it changes."""
        return cls(AclFileWatcher(path, check_interval_s))

    @property
    def config(self) -> AclConfig:
        return self._source.current() if isinstance(self._source, AclFileWatcher) else self._source

    def authenticate(self, headers: Mapping[str, str], remote_ip: str) -> AccessContext:
        """Check the caller; ``headers`` are the call's lower-case gRPC metadata. Raises UNAUTHORIZED."""
        config = self.config
        if any(pattern.matches(remote_ip) for pattern in config.global_white_remote_addresses):
            return AccessContext("", global_white=True)
        header = headers.get(AUTHORIZATION, "")
        if not header:
            raise MQError(Code.UNAUTHORIZED, f"no credentials: the {AUTHORIZATION!r} header is missing")
        # The reference requires the date before it looks at the header, even for a trusted address.
        date_time = headers.get(DATE_TIME, "")
        if not date_time:
            raise MQError(Code.UNAUTHORIZED, f"the {DATE_TIME!r} header is missing: it is what the signature signs")
        parsed = parse_authorization(header)
        if parsed.algorithm != AUTH_ALGORITHM:
            raise MQError(
                Code.UNAUTHORIZED, f"authorization algorithm {_shown(parsed.algorithm)} is not {AUTH_ALGORITHM}"
            )
        if not parsed.access_key:
            raise MQError(Code.UNAUTHORIZED, "no credentials: the access key is empty (the client has no credentials)")
        account = config.accounts.get(parsed.access_key)
        if account is None:
            raise MQError(Code.UNAUTHORIZED, f"access key {_shown(parsed.access_key)} is not known")
        if account.white_remote_address.matches(remote_ip):
            return AccessContext(account.access_key, account, trusted_address=True)
        if not verify(account.secret_key, date_time, parsed.signature_hex):
            raise MQError(
                Code.UNAUTHORIZED,
                f"signature check failed for access key {account.access_key!r} "
                f"(signed {DATE_TIME} {_shown(date_time)})",
            )
        return AccessContext(account.access_key, account)

    def authenticate_remoting(
        self, access_key: str, signature: str, signed_content: bytes, remote_ip: str
    ) -> AccessContext:
        """Check a RocketMQ 4 remoting request (PlainPermissionManager.validate's order): a globally white-listed
        caller passes; otherwise ``AccessKey`` must name an account; the account's whiteRemoteAddress is trusted;
        otherwise ``Signature`` must be HmacSHA1 (base64) of ``signed_content`` with the account's secret.
        Raises UNAUTHORIZED naming what failed."""
        config = self.config
        if any(pattern.matches(remote_ip) for pattern in config.global_white_remote_addresses):
            return AccessContext("", global_white=True)
        if not access_key:
            raise MQError(Code.UNAUTHORIZED, "no credentials: the request has no 'AccessKey' field")
        account = config.accounts.get(access_key)
        if account is None:
            raise MQError(Code.UNAUTHORIZED, f"access key {_shown(access_key)} is not known")
        if account.white_remote_address.matches(remote_ip):
            return AccessContext(account.access_key, account, trusted_address=True)
        expected = base64.b64encode(hmac.new(account.secret_key.encode(), signed_content, hashlib.sha1).digest())
        if not signature or not hmac.compare_digest(expected, signature.encode()):
            raise MQError(
                Code.UNAUTHORIZED,
                f"'Signature' check failed for access key {account.access_key!r} (HmacSHA1 over the ext fields "
                "sorted by name, then the body)",
            )
        return AccessContext(account.access_key, account)

    def authorize(self, ctx: AccessContext, kind: ResourceKind, resource: str, action: Action) -> None:
        """Check ``action`` on one resource for an authenticated caller. Raises FORBIDDEN."""
        if ctx.global_white or ctx.trusted_address:
            return
        account = ctx.account
        what = f"{kind.lower()} {_shown(resource)}"
        if account is None:
            raise MQError(Code.FORBIDDEN, f"{action.value} on {what}: the caller is not authenticated")
        if action is Action.ADMIN:
            if not account.admin:
                raise MQError(
                    Code.FORBIDDEN,
                    f"account {account.access_key!r} has no ADMIN permission on {what}: "
                    "admin operations need admin: true",
                )
            return
        needed = _NEEDED[action]
        if kind is ResourceKind.TOPIC and resource == TRACE_TOPIC and needed is Perm.PUB:
            return
        if account.admin and not account.has_resource_perms:
            return
        check = _check_for(account, kind, resource, needed)
        if not check_permission(check.needed, check.owned):
            via = f" (through topic {_shown(resource)})" if check.name != resource else ""
            raise MQError(
                Code.FORBIDDEN,
                f"account {account.access_key!r} has no {check.needed.label} permission on "
                f"{check.kind.lower()} {_shown(check.name)}{via}: {check.source} is {check.owned.label}",
            )

    def close(self) -> None:
        """Stop watching the file; the validator keeps answering with the last configuration."""
        if isinstance(self._source, AclFileWatcher):
            self._source.close()

    def __enter__(self) -> PlainAccessValidator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True)
class _Check:
    """What one permission check compares: the resource as the ACL sees it, what it needs and what it owns."""

    kind: ResourceKind
    name: str
    needed: Perm
    owned: Perm
    source: str  # where ``owned`` comes from, for the refusal message


def _check_for(account: Account, kind: ResourceKind, resource: str, needed: Perm) -> _Check:
    if kind is ResourceKind.GROUP:
        if resource in account.group_perms:
            return _Check(kind, resource, needed, account.group_perms[resource], "its groupPerms entry")
        return _Check(kind, resource, needed, account.default_group_perm, "its defaultGroupPerm")
    if resource in account.topic_perms:
        return _Check(kind, resource, needed, account.topic_perms[resource], "its topicPerms entry")
    group = group_of_topic(resource)
    if group is not None:
        # RocketMQ 4 checks a send to a retry topic as SUB on the group; ANY (route queries) stays ANY.
        return _check_for(account, ResourceKind.GROUP, group, Perm.SUB if needed is Perm.PUB else needed)
    return _Check(kind, resource, needed, account.default_topic_perm, "its defaultTopicPerm")
