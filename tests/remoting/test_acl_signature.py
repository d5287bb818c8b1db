"""RocketMQ 4's remoting signature, without processes: the content the Signature covers (ext field values sorted by
name as Java sorts Strings, Signature left out, the body appended; ``_UNIQUE_KEY_QUERY`` left out for clients up to
4.9.3) and the plain ACL validator's remoting checks, in RocketMQ's order."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker.remoting.acl import V4_9_3, signed_content
from orbitmq.errors import Code, MQError
from orbitmq.remoting.codec import RemotingCommand
from plugins.acl import PlainAccessValidator
from plugins.acl.config import AclConfig

ACL = """
globalWhiteRemoteAddresses: ["10.9.*.*"]
accounts:
  - accessKey: rocketAK
    secretKey: rocketSecret
    whiteRemoteAddress: 192.168.1.*
"""


def _hmac(secret: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def test_content_is_the_sorted_values_then_the_body() -> None:
    cmd = RemotingCommand(
        310,
        ext_fields={"b": "T", "AccessKey": "rocketAK", "a": "PG", "Signature": "ignored", "OnsChannel": "ALIYUN"},
        body=b"\x00body",
    )
    # Java's String order: upper case before lower case ("AccessKey" < "OnsChannel" < "a" < "b")
    assert signed_content(cmd) == b"rocketAKALIYUNPGT\x00body"


def test_unique_key_query_flag_is_left_out_for_old_clients_only() -> None:
    fields = {"topic": "T", "key": "k", "_UNIQUE_KEY_QUERY": "true"}
    old = RemotingCommand(12, ext_fields=dict(fields), version=V4_9_3)
    new = RemotingCommand(12, ext_fields=dict(fields), version=V4_9_3 + 1)
    assert signed_content(old) == b"kT"  # 4.9.3 and older added the flag after signing
    assert signed_content(new) == b"truekT"


def test_validator_checks_in_rocketmq_order() -> None:
    validator = PlainAccessValidator(AclConfig.from_yaml(ACL))
    content = b"valuesbody"
    good = _hmac("rocketSecret", content)
    ctx = validator.authenticate_remoting("rocketAK", good, content, "127.0.0.1")
    assert ctx.access_key == "rocketAK" and not ctx.trusted_address
    # the global white list needs no credentials; the account's white address needs no signature
    assert validator.authenticate_remoting("", "", content, "10.9.3.4").global_white
    assert validator.authenticate_remoting("rocketAK", "", content, "192.168.1.7").trusted_address
    with pytest.raises(MQError) as no_key:
        validator.authenticate_remoting("", good, content, "127.0.0.1")
    assert no_key.value.code is Code.UNAUTHORIZED and "'AccessKey'" in no_key.value.message
    with pytest.raises(MQError) as unknown:
        validator.authenticate_remoting("nobody", good, content, "127.0.0.1")
    assert "'nobody'" in unknown.value.message
    with pytest.raises(MQError) as bad:
        validator.authenticate_remoting("rocketAK", good, content + b"!", "127.0.0.1")
    assert "'Signature'" in bad.value.message and "'rocketAK'" in bad.value.message
