"""Transactions over remoting (RocketMQ 4's producer side): half messages parked through the broker's
TransactionService, END_TRANSACTION (commit, rollback, or the answer to a check-back), and the broker-initiated
CHECK_TRANSACTION_STATE sent oneway to a connected producer of the half message's group.

Commit and rollback are the same ones the v2 EndTransaction performs (op records, the re-put into the real topic),
so a half message sent over remoting may be ended from v2 and the other way round.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.remoting import acl as remoting_acl
from broker.remoting.clients import RemotingClients
from broker.remoting.message_codec import encode_message
from broker.store.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
)
from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.remoting.codec import FrameError, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from broker.context import BrokerContext

log = get_logger("broker.remoting.transaction")

# sends a request of the broker's own on a client's connection (RemotingServer.send_oneway)
SendOneway = Callable[[str, RemotingCommand], Awaitable[bool]]


def is_half(properties: dict[str, str], sys_flag: int) -> bool:
    """A prepared (half) message as 4.x producers mark it: the TRAN_MSG property or the prepared sys flag."""
    return properties.get(mc.PROPERTY_TRANSACTION_PREPARED) == "true" or bool(sys_flag & TRANSACTION_PREPARED_TYPE)


class RemotingTransactions:
    def __init__(self, ctx: BrokerContext, clients: RemotingClients, send: SendOneway) -> None:
        self.ctx = ctx
        self.clients = clients
        self.send = send
        self._rotation = itertools.count()  # spreads check-backs over a group's producers

    async def end(self, cmd: RemotingCommand, peer: str) -> RemotingCommand | None:
        """END_TRANSACTION (RocketMQ's EndTransactionProcessor): 8 commits, 12 rolls back, 0 leaves the half for
        the next check-back; the header must name the half as the send answered it (commitLogOffset,
        tranStateTableOffset) and the producer group that sent it."""
        if self.ctx.config.is_slave:
            return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE, "end transaction is refused by a slave broker")
        group = cmd.field("producerGroup")
        queue_offset = cmd.int_field("tranStateTableOffset")
        commitlog_offset = cmd.int_field("commitLogOffset")
        resolution = cmd.int_field("commitOrRollback")
        from_check = cmd.ext_fields.get("fromTransactionCheck", "false").lower() == "true"
        if resolution == TRANSACTION_NOT_TYPE:
            # still unknown to the producer: RocketMQ answers nothing and checks back later
            log.info("transaction still pending", producer_group=group, offset=commitlog_offset, check=from_check)
            return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS, "left pending for a check-back")
        if resolution not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            raise FrameError(
                f"END_TRANSACTION: header field 'commitOrRollback' is {resolution}: {TRANSACTION_COMMIT_TYPE} commits, "
                f"{TRANSACTION_ROLLBACK_TYPE} rolls back, {TRANSACTION_NOT_TYPE} leaves it unknown"
            )
        transactions = self.ctx.transactions
        if transactions is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "transactions are not enabled on this broker")
        source = "check-back" if from_check else "producer"
        try:
            await transactions.end_at(
                commitlog_offset, resolution == TRANSACTION_COMMIT_TYPE, source, group, queue_offset
            )
        except MQError as exc:
            if exc.code is not Code.INVALID_TRANSACTION_ID:
                raise
            # RocketMQ's checkPrepareMessage answers SYSTEM_ERROR with the mismatch in the remark
            return cmd.response(ResponseCode.SYSTEM_ERROR, exc.message)
        return cmd.response(ResponseCode.SUCCESS)

    async def check(self, parked: MessageExt) -> bool:
        """Ask a connected 4.x producer of the half message's group for its state (TransactionService's
        RemoteChecker); its END_TRANSACTION with fromTransactionCheck=true ends it."""
        group = parked.properties.get(mc.PROPERTY_PRODUCER_GROUP, "")
        if not group:
            return False  # RocketMQ asks the group's channel: a half without its group has nobody to ask
        real_topic = parked.properties.get(mc.PROPERTY_REAL_TOPIC, parked.topic)
        plugins = self.ctx.plugins
        # only clients that may publish to the topic see its message, as v2's check-back is guarded
        producers = [
            c
            for c in self.clients.producers(group)
            if remoting_acl.may_publish(plugins, c.credentials, c.peer, real_topic)
        ]
        if not producers:
            return False
        unique_id = parked.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        request = RemotingCommand(
            RequestCode.CHECK_TRANSACTION_STATE,
            ext_fields={
                "topic": parked.topic,  # the half topic, as RocketMQ's listener fills it
                "tranStateTableOffset": str(parked.queue_offset),
                "commitLogOffset": str(parked.commitlog_offset),
                "msgId": unique_id,
                "transactionId": unique_id,
                "offsetMsgId": parked.msg_id,
                "brokerName": self.ctx.broker_name,
            },
        )
        # the producer sees the message as it sent it: its real topic and queue
        real = dataclasses.replace(
            parked,
            topic=real_topic,
            queue_id=int(parked.properties.get(mc.PROPERTY_REAL_QUEUE_ID, "0") or 0),
        )
        request.body = encode_message(real)
        start = next(self._rotation)
        for i in range(len(producers)):
            target = producers[(start + i) % len(producers)]
            if await self.send(target.peer, request):
                log.info("transaction check sent", producer_group=group, client=target.client_id, msg_id=unique_id)
                return True
        return False
