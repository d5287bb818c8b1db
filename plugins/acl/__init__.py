"""Plain ACL (RocketMQ 4's ``plain_acl.yml``): accounts, white addresses, topic/group permissions, and the
v2 ``MQv2-HMAC-SHA1`` signature check; the broker reaches it through ``plugin.AclPlugin``."""

from plugins.acl.config import Account, AclConfig, AclConfigError, Perm
from plugins.acl.validator import AccessContext, Action, PlainAccessValidator, ResourceKind

__all__ = [
    "AccessContext",
    "Account",
    "AclConfig",
    "AclConfigError",
    "Action",
    "Perm",
    "PlainAccessValidator",
    "ResourceKind",
]
