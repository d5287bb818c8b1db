"""Broker metrics with RocketMQ 5's names, labels and buckets (``BrokerMetricsConstant``), exported for Prometheus,
OpenTelemetry (OTLP gRPC) or the log: counters on the message paths, gauges computed when scraped."""
