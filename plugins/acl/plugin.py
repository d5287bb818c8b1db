"""Plain ACL as a broker plugin: authenticates the v2 signature and authorizes topics and groups.

Registered by the broker as ``acl`` when ``aclEnable=true``; accounts come from ``plain_acl.yml`` (reloaded on change).
"""

from __future__ import annotations

from pathlib import Path

from broker.hookspecs import AccessRequest, AccountView, hookimpl
from broker.hookspecs import Action as HookAction
from broker.hookspecs import ResourceKind as HookKind
from plugins.acl import AccessContext, Action, PlainAccessValidator, ResourceKind

_ACTIONS = {
    HookAction.PUB: Action.PUB,
    HookAction.SUB: Action.SUB,
    HookAction.ANY: Action.PUB_SUB,
    HookAction.ADMIN: Action.ADMIN,
}


class AclPlugin:
    def __init__(self, acl_file: Path) -> None:
        self.validator = PlainAccessValidator.from_file(acl_file)

    @hookimpl
    def orbitmq_authenticate(self, request: AccessRequest) -> AccessContext:
        creds = request.remoting
        if creds is not None:  # a 4.x client's request: RocketMQ 4's signature over its ext fields and body
            return self.validator.authenticate_remoting(
                creds.access_key, creds.signature, creds.signed_content, request.remote_ip
            )
        return self.validator.authenticate(request.headers, request.remote_ip)

    @hookimpl
    def orbitmq_acl_accounts(self) -> list[AccountView]:
        return [
            AccountView(
                access_key=a.access_key,
                admin=a.admin,
                white_remote_address=str(a.white_remote_address),
                default_topic_perm=a.default_topic_perm.label,
                default_group_perm=a.default_group_perm.label,
                topic_perms={k: v.label for k, v in a.topic_perms.items()},
                group_perms={k: v.label for k, v in a.group_perms.items()},
            )
            for a in sorted(self.validator.config.accounts.values(), key=lambda a: a.access_key)
        ]

    @hookimpl
    def orbitmq_authorize(self, request: AccessRequest, principal: AccessContext | None) -> None:
        if principal is None:
            return
        for res in request.resources:
            if res.kind is HookKind.CLUSTER:
                # Admin RPCs: modelled as an admin-only action on the broker itself.
                self.validator.authorize(principal, ResourceKind.TOPIC, res.name, Action.ADMIN)
                continue
            kind = ResourceKind.TOPIC if res.kind is HookKind.TOPIC else ResourceKind.GROUP
            self.validator.authorize(principal, kind, res.name, _ACTIONS[res.action])
