"""The name server's answers to RocketMQ remoting clients (4.x): topic routes with the brokers' remoting addresses,
cluster info, and mqadmin's topic list and topic deletion. The same route tables as the gRPC services; brokers
without a remoting listener are left out of routes."""

from __future__ import annotations

import json

from namesrv.route_info import RouteInfoManager
from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.route import TopicRouteData


class NamesrvRemotingHandler:
    def __init__(self, routes: RouteInfoManager, auto_create_route: bool, writes_allowed: bool = True) -> None:
        self.routes = routes
        self.auto_create_route = auto_create_route
        # remoting requests carry no name-server credentials: with aclEnable they may read, not change routes
        self.writes_allowed = writes_allowed

    async def __call__(self, cmd: RemotingCommand, peer: str) -> RemotingCommand | None:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return self._route(cmd)
        if cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return self._cluster(cmd)
        if cmd.code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            response = cmd.response(ResponseCode.SUCCESS)
            response.body = json.dumps({"topicList": self.routes.topics(), "brokerAddr": None}).encode()
            return response
        if cmd.code == RequestCode.GET_TOPICS_BY_CLUSTER:
            response = cmd.response(ResponseCode.SUCCESS)
            topics = self.routes.topics_of_cluster(cmd.field("cluster"))
            response.body = json.dumps({"topicList": topics, "brokerAddr": None}).encode()
            return response
        if cmd.code == RequestCode.DELETE_TOPIC_IN_NAMESRV:
            return self._delete_topic(cmd)
        if cmd.code == RequestCode.GET_KV_CONFIG_BY_VALUE:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "no KV config by value on this name server")
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} is not supported")

    def _delete_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.field("topic")
        if not self.writes_allowed:
            return cmd.response(
                ResponseCode.NO_PERMISSION,
                f"deleting topic {topic!r}: this name server has aclEnable=true and remoting requests carry no "
                "name-server credentials (use mqadmin over gRPC)",
            )
        cluster = cmd.ext_fields.get("clusterName") or ""
        deleted = self.routes.delete_topic(topic, cluster)
        # RocketMQ answers SUCCESS for a topic it does not know: the end state is the one asked for
        return cmd.response(ResponseCode.SUCCESS, None if deleted else f"no route of topic {topic!r} to delete")

    def _remoting_addrs(self, broker_addrs: dict[int, str]) -> dict[str, str]:
        out = {}
        for broker_id, addr in broker_addrs.items():
            live = self.routes.broker_live_table.get(addr)
            if live is not None and live.remoting_addr:
                out[str(broker_id)] = live.remoting_addr
        return out

    def _route(self, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.field("topic")
        route: TopicRouteData | None = self.routes.route(topic)
        if route is None and self.auto_create_route:
            route = self.routes.auto_create_route(topic)
        brokers = [] if route is None else [
            {"cluster": b.cluster, "brokerName": b.broker_name, "brokerAddrs": self._remoting_addrs(b.broker_addrs)}
            for b in route.broker_datas
        ]  # fmt: skip
        brokers = [b for b in brokers if b["brokerAddrs"]]
        if route is None or not brokers:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"no route info of topic {topic!r} for remoting clients")
        served = {b["brokerName"] for b in brokers}
        body: dict[str, object] = {
            "orderTopicConf": None,
            "queueDatas": [
                {
                    "brokerName": q.broker_name,
                    "readQueueNums": q.read_queue_nums,
                    "writeQueueNums": q.write_queue_nums,
                    "perm": int(q.perm),
                    "topicSysFlag": 0,
                }
                for q in route.queue_datas
                if q.broker_name in served
            ],
            "brokerDatas": brokers,
            "filterServerTable": {},
        }
        response = cmd.response(ResponseCode.SUCCESS)
        response.body = json.dumps(body).encode()
        return response

    def _cluster(self, cmd: RemotingCommand) -> RemotingCommand:
        info = self.routes.cluster_info()
        body: dict[str, object] = {
            "brokerAddrTable": {
                name: {
                    "cluster": data.cluster,
                    "brokerName": data.broker_name,
                    "brokerAddrs": self._remoting_addrs(data.broker_addrs),
                }
                for name, data in info.broker_addr_table.items()
            },
            "clusterAddrTable": {name: sorted(names) for name, names in info.cluster_addr_table.items()},
        }
        response = cmd.response(ResponseCode.SUCCESS)
        response.body = json.dumps(body).encode()
        return response
