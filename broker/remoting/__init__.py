"""The broker's RocketMQ remoting listener (4.x clients): send, pull with long polling, offsets, heartbeats and
consumer lists, send-back for retries, answered from the same store and services as the gRPC protocol."""
