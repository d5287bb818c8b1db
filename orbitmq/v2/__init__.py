"""RocketMQ 5 gRPC v2 glue shared by the name server and the broker."""
