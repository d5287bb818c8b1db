"""The gRPC guard's generic-handler wrapper: a method's guarded handler is built once and reused while the inner
handler hands out the same method handler; what the guard does to a call is tested through the broker."""

from __future__ import annotations

from typing import Any, NamedTuple

import grpc

from orbitmq.grpc_guard import MAX_WRAPPED_METHODS, GuardedServer


class Details(NamedTuple):
    method: str
    invocation_metadata: tuple[Any, ...] = ()


async def echo(request: Any, context: Any) -> Any:
    return request


class Recorder:
    """Stands in for the grpc server: keeps the handlers the guard registers."""

    def __init__(self) -> None:
        self.handlers: list[grpc.GenericRpcHandler] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.handlers.extend(handlers)


class Switching(grpc.GenericRpcHandler):
    """Answers every method, with the handler currently in ``self.current``."""

    def __init__(self) -> None:
        self.current = grpc.unary_unary_rpc_method_handler(echo)

    def service(self, handler_call_details: Any) -> Any:
        return self.current


def guard(inner: grpc.GenericRpcHandler) -> grpc.GenericRpcHandler:
    recorder = Recorder()
    GuardedServer(recorder).add_generic_rpc_handlers([inner])
    return recorder.handlers[0]


def test_a_method_is_wrapped_once_and_unknown_methods_stay_unknown() -> None:
    inner = grpc.method_handlers_generic_handler("S", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    guarded = guard(inner)
    first = guarded.service(Details("/S/Echo"))
    assert first is not None and first.unary_unary is not echo  # the guard's wrapper, not the bare handler
    assert guarded.service(Details("/S/Echo")) is first
    assert guarded.service(Details("/S/Other")) is None


def test_a_new_inner_handler_gets_a_new_wrapper_and_a_catch_all_cannot_grow_the_cache() -> None:
    inner = Switching()
    guarded = guard(inner)
    before = guarded.service(Details("/S/A"))
    inner.current = grpc.unary_unary_rpc_method_handler(echo)
    after = guarded.service(Details("/S/A"))
    assert after is not before
    assert guarded.service(Details("/S/A")) is after
    for i in range(MAX_WRAPPED_METHODS * 2):
        assert guarded.service(Details(f"/S/M{i}")) is not None
    assert len(guarded._wrapped) == MAX_WRAPPED_METHODS
