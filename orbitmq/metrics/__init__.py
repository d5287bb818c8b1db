"""Metrics every OrbitMQ process shares: RocketMQ 5's common names and buckets, the exporter-neutral model (families
of samples, fixed-bucket histograms), the exporters behind ``metricsExporterType`` and the config keys. The broker,
the name server and the ``oms`` client each add their own metrics on top (``broker/metrics``, ``namesrv/metrics.py``,
``oms/client/metrics.py``)."""
