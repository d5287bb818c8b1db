"""Broker metrics with RocketMQ 5's names, labels and buckets (``BrokerMetricsConstant``): counters on the message
paths, gauges computed when scraped. The exporters (Prometheus, OTLP gRPC, log) and what the name server and the
clients share are in ``orbitmq.metrics``."""
