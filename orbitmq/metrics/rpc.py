"""``rocketmq_rpc_latency`` of one server process, fed by its gRPC server (``orbitmq.grpc_guard``'s observer) and
its remoting listener (``orbitmq.remoting.server``'s observer): one histogram update per answered request."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from orbitmq.metrics import constants as c
from orbitmq.metrics.model import Family, Histogram, Labels
from orbitmq.remoting.codes import RequestCode, ResponseCode

RpcKey = tuple[str, str, str, str]  # protocol type, request code, response code, result


def _remoting_name(enum: type[RequestCode] | type[ResponseCode], code: int) -> str:
    """RocketMQ's ``RemotingHelper.getRequestCodeDesc``: the code's constant name in lower case, else the number."""
    try:
        return enum(code).name.lower()
    except ValueError:
        return str(code)


class RpcLatency:
    """Thread-safe: gRPC and remoting answer on the loop, but exporters read from their own threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hist: dict[RpcKey, Histogram] = {}

    def _observe(self, key: RpcKey, seconds: float) -> None:
        with self._lock:
            hist = self._hist.get(key)
            if hist is None:
                hist = self._hist[key] = Histogram(c.RPC_LATENCY_BUCKETS_MS)
            hist.observe(seconds * 1000)  # RocketMQ's unit: ms

    def on_grpc(self, method: str, response: Any, seconds: float) -> None:
        """A unary gRPC call answered (``response`` None when it raised): the method's short name as request code,
        the reply's status code as response code. Streams (Telemetry, the brokers' registration session) are not
        timed: they have no one answer."""
        if response is None:
            code = "-1"
        else:  # v2 replies carry a Status; the internal services' replies a code of their own
            status = getattr(response, "status", None)
            code = str(getattr(status, "code", 0) if status is not None else getattr(response, "code", 0))
        result = c.RESULT_SUCCESS if response is not None else c.RESULT_FAILED
        self._observe((c.PROTOCOL_TYPE_GRPC, method.rsplit("/", 1)[-1], code, result), seconds)

    def on_remoting(self, request_code: int, response_code: int | None, oneway: bool, seconds: float) -> None:
        """A remoting request handled (``response_code`` None when the handler raised or had no answer)."""
        if oneway:
            result, response = c.RESULT_ONEWAY, ""
        elif response_code is None:
            result, response = c.RESULT_FAILED, ""
        else:
            result, response = c.RESULT_SUCCESS, _remoting_name(ResponseCode, response_code)
        self._observe((c.PROTOCOL_TYPE_REMOTING, _remoting_name(RequestCode, request_code), response, result), seconds)

    def families(self, labels: Callable[..., Labels]) -> Iterator[Family]:
        """``labels(**own)`` adds the process's base labels (cluster, node_type, node_id, metricsLabel)."""
        with self._lock:
            snap = {k: h.copy() for k, h in self._hist.items()}
        yield Family(
            c.RPC_LATENCY,
            "histogram",
            "request latency (ms)",
            [
                (labels(protocol_type=p, request_code=req, response_code=resp, result=result), h)
                for (p, req, resp, result), h in snap.items()
            ],
        )
