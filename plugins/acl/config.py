"""The accounts of ``plain_acl.yml`` (RocketMQ 4's plain ACL format) as validated dataclasses.

Every error names the account and the field, so an operator can fix the file from the log line alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntFlag
from pathlib import Path
from typing import Any

import yaml

from plugins.acl.remote_address import AddressPatternError, RemoteAddressPattern

MIN_SECRET_KEY_LENGTH = 6  # RocketMQ refuses shorter secret keys


class AclConfigError(ValueError):
    """A ``plain_acl.yml`` that cannot be used; the message names the account and field."""


class Perm(IntFlag):
    """RocketMQ's ``Permission`` bits."""

    NONE = 0
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8

    @classmethod
    def parse(cls, text: str | None, where: str) -> Perm:
        if text is None or not str(text).strip():
            return cls.DENY  # RocketMQ: an unset permission denies
        value = str(text).strip().upper()
        perms = {"DENY": cls.DENY, "PUB": cls.PUB, "SUB": cls.SUB, "PUB|SUB": cls.PUB | cls.SUB}
        perms["SUB|PUB"] = perms["PUB|SUB"]
        if value not in perms:
            raise AclConfigError(f"{where}: permission {text!r} is not one of DENY, PUB, SUB, PUB|SUB")
        return perms[value]


def check_permission(needed: Perm, owned: Perm) -> bool:
    """RocketMQ's ``Permission.checkPermission``: DENY wins, ANY needs PUB or SUB, else the bits must meet."""
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    white_remote_address: RemoteAddressPattern
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    topic_perms: Mapping[str, Perm] = field(default_factory=dict)
    group_perms: Mapping[str, Perm] = field(default_factory=dict)


@dataclass(frozen=True)
class AclConfig:
    accounts: Mapping[str, Account]
    global_white_remote_addresses: tuple[RemoteAddressPattern, ...] = ()

    @classmethod
    def load(cls, path: Path) -> AclConfig:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise AclConfigError(f"{path}: cannot read ACL file: {exc}") from exc
        return cls.parse(data or {}, str(path))

    @classmethod
    def parse(cls, data: Any, source: str = "plain_acl.yml") -> AclConfig:
        if not isinstance(data, dict):
            raise AclConfigError(f"{source}: the top level must be a mapping")
        try:
            global_white = tuple(
                RemoteAddressPattern.parse(str(a)) for a in (data.get("globalWhiteRemoteAddresses") or [])
            )
        except AddressPatternError as exc:
            raise AclConfigError(f"{source}: globalWhiteRemoteAddresses: {exc}") from exc
        accounts: dict[str, Account] = {}
        for i, raw in enumerate(data.get("accounts") or []):
            account = _account(raw, f"{source}: accounts[{i}]")
            if account.access_key in accounts:
                raise AclConfigError(f"{source}: accounts[{i}]: accessKey {account.access_key!r} appears twice")
            accounts[account.access_key] = account
        return cls(accounts, global_white)


def _perm_list(items: Any, where: str) -> dict[str, Perm]:
    perms: dict[str, Perm] = {}
    for item in items or []:
        name, eq, perm = str(item).partition("=")
        if not eq or not name.strip():
            raise AclConfigError(f"{where}: {item!r} is not name=PERM")
        perms[name.strip()] = Perm.parse(perm, f"{where} {name.strip()!r}")
    return perms


def _account(raw: Any, where: str) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: an account must be a mapping")
    access_key = str(raw.get("accessKey") or "").strip()
    if not access_key:
        raise AclConfigError(f"{where}: accessKey is missing")
    where = f"{where} ({access_key})"
    secret_key = str(raw.get("secretKey") or "")
    if len(secret_key) < MIN_SECRET_KEY_LENGTH:
        raise AclConfigError(f"{where}: secretKey must have at least {MIN_SECRET_KEY_LENGTH} characters")
    try:
        white = RemoteAddressPattern.parse(raw.get("whiteRemoteAddress"))
    except AddressPatternError as exc:
        raise AclConfigError(f"{where}: whiteRemoteAddress: {exc}") from exc
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=white,
        admin=bool(raw.get("admin", False)),
        default_topic_perm=Perm.parse(raw.get("defaultTopicPerm"), f"{where} defaultTopicPerm"),
        default_group_perm=Perm.parse(raw.get("defaultGroupPerm"), f"{where} defaultGroupPerm"),
        topic_perms=_perm_list(raw.get("topicPerms"), f"{where} topicPerms"),
        group_perms=_perm_list(raw.get("groupPerms"), f"{where} groupPerms"),
    )
