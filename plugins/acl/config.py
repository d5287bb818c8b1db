"""The accounts of ``plain_acl.yml`` (RocketMQ 4's plain ACL format) as validated, immutable dataclasses.

Every error names the file, the account and the field, so an operator can fix the file from the log line alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntFlag
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from plugins.acl.remote_address import AddressPatternError, RemoteAddressPattern

log = logging.getLogger(__name__)

# RocketMQ's checkPlainAccessConfig refuses a secretKey of 6 characters or fewer (AclConstants.SECRET_KEY_MIN_LENGTH).
SECRET_KEY_MIN_LENGTH = 6

GLOBAL_WHITE_REMOTE_ADDRESSES = "globalWhiteRemoteAddresses"
ACCOUNTS = "accounts"
DATA_VERSION = "dataVersion"  # written by RocketMQ's admin tools; carries no meaning for access checks
ACCESS_KEY = "accessKey"
SECRET_KEY = "secretKey"
WHITE_REMOTE_ADDRESS = "whiteRemoteAddress"
ADMIN = "admin"
DEFAULT_TOPIC_PERM = "defaultTopicPerm"
DEFAULT_GROUP_PERM = "defaultGroupPerm"
TOPIC_PERMS = "topicPerms"
GROUP_PERMS = "groupPerms"

_TOP_LEVEL_KEYS = frozenset({GLOBAL_WHITE_REMOTE_ADDRESSES, ACCOUNTS, DATA_VERSION})
_ACCOUNT_KEYS = frozenset(
    {
        ACCESS_KEY,
        SECRET_KEY,
        WHITE_REMOTE_ADDRESS,
        ADMIN,
        DEFAULT_TOPIC_PERM,
        DEFAULT_GROUP_PERM,
        TOPIC_PERMS,
        GROUP_PERMS,
    }
)


class AclConfigError(ValueError):
    """A ``plain_acl.yml`` that cannot be used; the message names the file, account and field."""


class Perm(IntFlag):
    """RocketMQ's ``Permission`` bits; ``ANY`` is only ever *needed* (PUB or SUB will do), never granted."""

    NONE = 0
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8

    @classmethod
    def parse(cls, text: Any, where: str) -> Perm:
        """``DENY``, ``PUB``, ``SUB``, ``PUB|SUB`` or ``SUB|PUB``; absent means DENY, as in RocketMQ."""
        if text is None or (isinstance(text, str) and not text.strip()):
            return cls.DENY
        if not isinstance(text, str):
            raise AclConfigError(f"{where}: permission {text!r} is not one of DENY, PUB, SUB, PUB|SUB")
        # RocketMQ silently turns any other string (even "pub") into DENY; refusing it surfaces the typo instead.
        value = _PERM_NAMES.get(text.strip())
        if value is None:
            raise AclConfigError(f"{where}: permission {text!r} is not one of DENY, PUB, SUB, PUB|SUB")
        return value

    @property
    def label(self) -> str:
        """The spelling ``plain_acl.yml`` uses, for messages."""
        if self & Perm.DENY:
            return "DENY"
        if self & Perm.ANY:
            return "PUB or SUB"
        return "|".join(name for bit, name in ((Perm.PUB, "PUB"), (Perm.SUB, "SUB")) if self & bit) or "nothing"


_PERM_NAMES = {
    "DENY": Perm.DENY,
    "PUB": Perm.PUB,
    "SUB": Perm.SUB,
    "PUB|SUB": Perm.PUB | Perm.SUB,
    "SUB|PUB": Perm.PUB | Perm.SUB,
}


def check_permission(needed: Perm, owned: Perm) -> bool:
    """RocketMQ's ``Permission.checkPermission``: DENY wins, ANY needs PUB or SUB, else the bits must meet."""
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


def _frozen(perms: Mapping[str, Perm]) -> Mapping[str, Perm]:
    return MappingProxyType(dict(perms))


@dataclass(frozen=True)
class Account:
    """One entry of ``accounts``; ``topic_perms`` / ``group_perms`` are the explicit ``name=PERM`` entries."""

    access_key: str
    secret_key: str = field(repr=False)  # never in a log line
    white_remote_address: RemoteAddressPattern = field(default_factory=lambda: RemoteAddressPattern.parse(""))
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    topic_perms: Mapping[str, Perm] = field(default_factory=lambda: _frozen({}))
    group_perms: Mapping[str, Perm] = field(default_factory=lambda: _frozen({}))

    @property
    def has_resource_perms(self) -> bool:
        """RocketMQ lets an admin skip resource checks only when it lists no topicPerms and no groupPerms."""
        return bool(self.topic_perms or self.group_perms)


class _TextLoader(yaml.SafeLoader):
    """SafeLoader that keeps numbers and dates as written, so ``secretKey: 0123456`` stays "0123456".

    Plain ``yaml.safe_load`` would read that as the octal int 42798 and the stored secret would not be the one
    the operator typed (RocketMQ's own sample has ``secretKey: 12345678``). Booleans and nulls still resolve.
    """


_TextLoader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    """Parse ACL YAML with SafeLoader's safety (no Python objects), keeping scalars other than booleans as text."""
    return yaml.load(text, Loader=_TextLoader)  # a SafeLoader subclass: as safe as safe_load


@dataclass(frozen=True)
class AclConfig:
    """A whole ``plain_acl.yml``: accounts by access key and the global white addresses (no credentials needed)."""

    accounts: Mapping[str, Account]
    global_white_remote_addresses: tuple[RemoteAddressPattern, ...] = ()
    source: str = "plain_acl.yml"

    @classmethod
    def load(cls, path: Path) -> AclConfig:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AclConfigError(f"{path}: cannot read the ACL file: {exc}") from exc
        return cls.from_yaml(text, str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "plain_acl.yml") -> AclConfig:
        try:
            data = load_yaml(text)
        except yaml.YAMLError as exc:
            raise AclConfigError(f"{source}: not valid YAML: {exc}") from exc
        return cls.parse(data, source)

    @classmethod
    def parse(cls, data: Any, source: str = "plain_acl.yml") -> AclConfig:
        """Validate an already parsed document (a mapping). An empty document is an error, not "no accounts".

        An editor that truncates the file before writing it, or a failed copy, leaves it empty for a moment; read as
        "nobody may do anything" that would lock every client out, so a reload keeps the previous rules instead.
        ``accounts: []`` says "no accounts" on purpose.
        """
        if data is None:
            raise AclConfigError(
                f"{source}: the file is empty (no {ACCOUNTS}, no {GLOBAL_WHITE_REMOTE_ADDRESSES}); "
                f"write '{ACCOUNTS}: []' for a configuration without accounts"
            )
        if not isinstance(data, dict):
            raise AclConfigError(
                f"{source}: the top level must be a mapping with {ACCOUNTS} and {GLOBAL_WHITE_REMOTE_ADDRESSES}"
            )
        _warn_unknown(data, _TOP_LEVEL_KEYS, source)
        global_white = tuple(
            _pattern(item, f"{source}: {GLOBAL_WHITE_REMOTE_ADDRESSES}[{i}]")
            for i, item in enumerate(
                _list(data.get(GLOBAL_WHITE_REMOTE_ADDRESSES), f"{source}: {GLOBAL_WHITE_REMOTE_ADDRESSES}")
            )
        )
        accounts: dict[str, Account] = {}
        for i, raw in enumerate(_list(data.get(ACCOUNTS), f"{source}: {ACCOUNTS}")):
            account = _account(raw, f"{source}: {ACCOUNTS}[{i}]")
            if account.access_key in accounts:
                # RocketMQ keeps the first and only logs; two secrets for one key is a mistake worth stopping on.
                raise AclConfigError(
                    f"{source}: {ACCOUNTS}[{i}] ({account.access_key}): {ACCESS_KEY} {account.access_key!r} "
                    "is already defined by an earlier account"
                )
            accounts[account.access_key] = account
        return cls(MappingProxyType(accounts), global_white, source)


def _warn_unknown(raw: Mapping[Any, Any], known: frozenset[str], where: str) -> None:
    # RocketMQ ignores unknown keys; a typo such as "topicPerm" would silently deny, so say so in the log.
    for key in raw:
        if key not in known:
            log.warning("%s: unknown key %r is ignored (known: %s)", where, key, ", ".join(sorted(known)))


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: must be a list, not {type(value).__name__}")
    return value


def _text(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise AclConfigError(f"{where}: {key} must be a string, not {type(value).__name__} {value!r}")
    return value


def _pattern(value: Any, where: str) -> RemoteAddressPattern:
    if value is not None and not isinstance(value, str):
        raise AclConfigError(f"{where}: an address pattern must be a string, not {type(value).__name__}")
    try:
        return RemoteAddressPattern.parse(value)
    except AddressPatternError as exc:
        raise AclConfigError(f"{where}: {exc}") from exc


def _admin(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{where}: {ADMIN} must be true or false, not {value!r}")


def _perm_list(items: Any, key: str, where: str) -> Mapping[str, Perm]:
    """``name=PERM`` entries; a name listed twice keeps its last permission, as RocketMQ's map does."""
    perms: dict[str, Perm] = {}
    for i, item in enumerate(_list(items, f"{where}: {key}")):
        text = item if isinstance(item, str) else ""
        name, eq, perm = text.partition("=")
        if not eq or not name.strip():
            raise AclConfigError(f"{where}: {key}[{i}] {item!r} is not name=PERM (for example topicA=PUB|SUB)")
        perms[name.strip()] = Perm.parse(perm, f"{where}: {key}[{i}] {name.strip()!r}")
    return _frozen(perms)


def _account(raw: Any, where: str) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: an account must be a mapping with {ACCESS_KEY} and {SECRET_KEY}")
    access_key = (_text(raw, ACCESS_KEY, where) or "").strip()
    if not access_key:
        raise AclConfigError(f"{where}: {ACCESS_KEY} is missing")
    where = f"{where} ({access_key})"
    _warn_unknown(raw, _ACCOUNT_KEYS, where)
    secret_key = _text(raw, SECRET_KEY, where)
    if not secret_key:
        raise AclConfigError(f"{where}: {SECRET_KEY} is missing")
    if len(secret_key) <= SECRET_KEY_MIN_LENGTH:
        raise AclConfigError(
            f"{where}: {SECRET_KEY} has {len(secret_key)} characters; "
            f"RocketMQ requires more than {SECRET_KEY_MIN_LENGTH}"
        )
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=_pattern(raw.get(WHITE_REMOTE_ADDRESS), f"{where}: {WHITE_REMOTE_ADDRESS}"),
        admin=_admin(raw.get(ADMIN), where),
        default_topic_perm=Perm.parse(raw.get(DEFAULT_TOPIC_PERM), f"{where}: {DEFAULT_TOPIC_PERM}"),
        default_group_perm=Perm.parse(raw.get(DEFAULT_GROUP_PERM), f"{where}: {DEFAULT_GROUP_PERM}"),
        topic_perms=_perm_list(raw.get(TOPIC_PERMS), TOPIC_PERMS, where),
        group_perms=_perm_list(raw.get(GROUP_PERMS), GROUP_PERMS, where),
    )
