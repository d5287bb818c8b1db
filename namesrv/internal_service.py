"""The internal ``orbitmq.namesrv.NameServer`` service: broker sessions, registration, routes, KV config.

Status codes are v2 codes in the ``code`` field (OK = 20000); gRPC status stays OK for business errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from namesrv.config import RUNTIME_UPDATABLE_KEYS, NamesrvConfig
from namesrv.kv_config import KVConfigManager
from namesrv.route_info import RouteInfoManager
from orbitmq.cluster_auth import ClusterCredentials
from orbitmq.config import ConfigError, apply_runtime_updates, config_strings
from orbitmq.errors import MQError
from orbitmq.logging import get_logger
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.proto import namesrv_pb2_grpc as pb_grpc
from orbitmq.route_proto import broker_data_to_proto, queue_data_to_proto
from orbitmq.v2.metadata import client_meta

log = get_logger("namesrv")

OK = definition_pb2.Code.OK
BAD_REQUEST = definition_pb2.Code.BAD_REQUEST
TOPIC_NOT_FOUND = definition_pb2.Code.TOPIC_NOT_FOUND
NOT_FOUND = definition_pb2.Code.NOT_FOUND


def _check_registration(reg: pb.BrokerRegistration) -> str:
    """An empty string if ``reg`` is usable, else what is wrong with it."""
    if not reg.cluster_name or not reg.broker_name or not reg.broker_addr:
        return "cluster_name, broker_name and broker_addr are required"
    if reg.broker_id < 0:
        return f"broker_id must be >= 0, got {reg.broker_id}"
    if ":" not in reg.broker_addr:
        return f"broker_addr {reg.broker_addr!r} is not host:port"
    return ""


class NameServerService(pb_grpc.NameServerServicer):
    """With ``credentials`` (ACL on) every write RPC must be signed with them; reads stay open, as in RocketMQ."""

    def __init__(
        self,
        routes: RouteInfoManager,
        kv: KVConfigManager,
        credentials: ClusterCredentials | None = None,
        config: NamesrvConfig | None = None,
        on_config_change: Callable[[], None] | None = None,
    ) -> None:
        self.routes = routes
        self.kv = kv
        self.credentials = credentials
        self.config = config or NamesrvConfig()
        self.on_config_change = on_config_change  # pushes runtime-updatable keys into the services that copied them

    def _refusal(self, context: Any, rpc: str) -> MQError | None:
        """None if the caller may write; else the UNAUTHORIZED error (logged with the caller's address)."""
        if self.credentials is None:
            return None
        meta = client_meta(context)
        try:
            self.credentials.check(meta.headers)
        except MQError as exc:
            log.warning("write refused", rpc=rpc, peer=meta.peer, reason=exc.message)
            return exc
        return None

    def _register(self, reg: pb.BrokerRegistration, session: object | None) -> pb.RegisterBrokerResult:
        problem = _check_registration(reg)
        if problem:
            return pb.RegisterBrokerResult(code=BAD_REQUEST, message=problem)
        outcome = self.routes.register_broker(reg, session)
        if outcome.is_new:
            log.info(
                "broker registered",
                cluster=reg.cluster_name,
                broker=reg.broker_name,
                broker_id=reg.broker_id,
                addr=reg.broker_addr,
                topics=len(reg.topic_configs),
                session=session is not None,
            )
        return pb.RegisterBrokerResult(
            code=OK, message="OK", master_addr=outcome.master_addr, ha_server_addr=outcome.ha_server_addr
        )

    async def BrokerSession(
        self, request_iterator: AsyncIterable[pb.BrokerRegistration], context: Any
    ) -> AsyncIterator[pb.RegisterBrokerResult]:
        refused = self._refusal(context, "BrokerSession")
        if refused is not None:
            yield pb.RegisterBrokerResult(code=refused.code, message=refused.message)
            return
        session = object()
        try:
            async for reg in request_iterator:
                yield self._register(reg, session)
        finally:
            # the broker closed its session (shutdown, crash, network): it leaves the routes now
            for live in self.routes.drop_session(session):
                log.info(
                    "broker session closed", broker=live.broker_name, broker_id=live.broker_id, addr=live.broker_addr
                )

    async def RegisterBroker(self, request: pb.BrokerRegistration, context: Any) -> pb.RegisterBrokerResult:
        refused = self._refusal(context, "RegisterBroker")
        if refused is not None:
            return pb.RegisterBrokerResult(code=refused.code, message=refused.message)
        return self._register(request, None)

    async def UnregisterBroker(self, request: pb.UnregisterBrokerRequest, context: Any) -> pb.SimpleResult:
        refused = self._refusal(context, "UnregisterBroker")
        if refused is not None:
            return pb.SimpleResult(code=refused.code, message=refused.message)
        if self.routes.unregister_broker(
            request.cluster_name, request.broker_name, request.broker_id, request.broker_addr
        ):
            log.info(
                "broker unregistered", broker=request.broker_name, broker_id=request.broker_id, addr=request.broker_addr
            )
            return pb.SimpleResult(code=OK, message="OK")
        return pb.SimpleResult(code=NOT_FOUND, message=f"broker {request.broker_addr} is not registered")

    async def GetRouteInfoByTopic(self, request: pb.GetRouteInfoRequest, context: Any) -> pb.GetRouteInfoResponse:
        route = self.routes.route(request.topic)
        if route is None:
            return pb.GetRouteInfoResponse(code=TOPIC_NOT_FOUND, message=f"no route for topic {request.topic!r}")
        return pb.GetRouteInfoResponse(
            code=OK,
            message="OK",
            queue_datas=[queue_data_to_proto(q) for q in route.queue_datas],
            broker_datas=[broker_data_to_proto(b) for b in route.broker_datas],
        )

    async def GetBrokerClusterInfo(self, request: pb.GetClusterInfoRequest, context: Any) -> pb.GetClusterInfoResponse:
        info = self.routes.cluster_info()
        return pb.GetClusterInfoResponse(
            code=OK,
            message="OK",
            broker_addr_table={k: broker_data_to_proto(v) for k, v in info.broker_addr_table.items()},
            cluster_addr_table={
                k: pb.BrokerNameList(broker_names=sorted(v)) for k, v in info.cluster_addr_table.items()
            },
        )

    async def GetAllTopicList(self, request: pb.GetAllTopicListRequest, context: Any) -> pb.GetAllTopicListResponse:
        return pb.GetAllTopicListResponse(code=OK, message="OK", topics=self.routes.topics())

    async def PutKVConfig(self, request: pb.KVConfigRequest, context: Any) -> pb.SimpleResult:
        refused = self._refusal(context, "PutKVConfig")
        if refused is not None:
            return pb.SimpleResult(code=refused.code, message=refused.message)
        if not request.namespace or not request.key:
            return pb.SimpleResult(code=BAD_REQUEST, message="namespace and key are required")
        self.kv.put(request.namespace, request.key, request.value)
        return pb.SimpleResult(code=OK, message="OK")

    async def GetKVConfig(self, request: pb.KVConfigRequest, context: Any) -> pb.KVConfigResponse:
        value = self.kv.get(request.namespace, request.key)
        if value is None:
            return pb.KVConfigResponse(code=NOT_FOUND, message=f"no KV config {request.namespace}/{request.key}")
        return pb.KVConfigResponse(code=OK, message="OK", value=value)

    async def DeleteKVConfig(self, request: pb.KVConfigRequest, context: Any) -> pb.SimpleResult:
        refused = self._refusal(context, "DeleteKVConfig")
        if refused is not None:
            return pb.SimpleResult(code=refused.code, message=refused.message)
        if not self.kv.delete(request.namespace, request.key):
            return pb.SimpleResult(code=NOT_FOUND, message=f"no KV config {request.namespace}/{request.key}")
        return pb.SimpleResult(code=OK, message="OK")

    async def UpdateBrokerWritePerm(self, request: pb.BrokerWritePermRequest, context: Any) -> pb.BrokerWritePermResult:
        rpc = "AddWritePerm" if request.writable else "WipeWritePerm"
        refused = self._refusal(context, rpc)
        if refused is not None:
            return pb.BrokerWritePermResult(code=refused.code, message=refused.message)
        try:
            count = self.routes.set_write_perm(request.broker_name, request.writable)
        except KeyError:
            return pb.BrokerWritePermResult(code=NOT_FOUND, message=f"no broker named {request.broker_name!r}")
        log.info("broker write permission changed", broker=request.broker_name, writable=request.writable)
        return pb.BrokerWritePermResult(code=OK, message="OK", topic_count=count)

    async def GetNamesrvConfig(self, request: pb.NamesrvConfigRequest, context: Any) -> pb.NamesrvConfigResponse:
        return pb.NamesrvConfigResponse(code=OK, message="OK", config=config_strings(self.config))

    async def UpdateNamesrvConfig(self, request: pb.NamesrvConfigRequest, context: Any) -> pb.NamesrvConfigResponse:
        refused = self._refusal(context, "UpdateNamesrvConfig")
        if refused is not None:
            return pb.NamesrvConfigResponse(code=refused.code, message=refused.message)
        if not request.updates:
            return pb.NamesrvConfigResponse(code=BAD_REQUEST, message="updates is empty: name at least one key")
        try:
            apply_runtime_updates(self.config, dict(request.updates), RUNTIME_UPDATABLE_KEYS)
        except ConfigError as exc:
            return pb.NamesrvConfigResponse(code=BAD_REQUEST, message=str(exc))
        if self.on_config_change is not None:
            self.on_config_change()
        log.info("name server config updated at runtime", updates=dict(request.updates))
        return pb.NamesrvConfigResponse(code=OK, message="OK", config=config_strings(self.config))
