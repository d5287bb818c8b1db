"""The OrbitMQ broker: durable store, delivery services and the RocketMQ 5 gRPC servicer."""
