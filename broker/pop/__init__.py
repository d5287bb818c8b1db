"""Receive/ack consumption (RocketMQ 5 "pop"): invisible-time delivery, receipt handles, ack, nack, DLQ.

State lives in memory per (group, topic, queue) and is persisted by an append-only journal plus snapshots.
"""
