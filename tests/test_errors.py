from rocketmq.grpc_protocol import definition_pb2

from orbitmq.errors import Code, MQError


def test_code_matches_protocol_bindings():
    assert {c.name: int(c) for c in Code} == dict(definition_pb2.Code.items())


def test_error_str_names_code():
    assert str(MQError(Code.ILLEGAL_TOPIC, "topic too long")) == "ILLEGAL_TOPIC(40002): topic too long"
