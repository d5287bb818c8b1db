"""Plain ACL (RocketMQ 4's ``plain_acl.yml``): accounts, white addresses, topic/group permissions, and the
v2 ``MQv2-HMAC-SHA1`` signature check. The broker reaches it through ``plugin.AclPlugin``."""

from plugins.acl.config import Account, AclConfig, AclConfigError, Perm, check_permission
from plugins.acl.remote_address import AddressPatternError, RemoteAddressPattern
from plugins.acl.validator import AccessContext, Action, PlainAccessValidator, ResourceKind, group_of_topic
from plugins.acl.watcher import AclFileWatcher

__all__ = [
    "AccessContext",
    "Account",
    "AclConfig",
    "AclConfigError",
    "AclFileWatcher",
    "Action",
    "AddressPatternError",
    "Perm",
    "PlainAccessValidator",
    "RemoteAddressPattern",
    "ResourceKind",
    "check_permission",
    "group_of_topic",
]
