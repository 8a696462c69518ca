"""RIP-46 metrics: RocketMQ 5's series, exported through OpenTelemetry (PROM, OTLP_GRPC, LOG).

``settings`` reads the keys; ``broker_meter`` and ``namesrv_meter`` say what each server
measures; ``exporter`` runs the exporter; ``histograms`` and ``rpc_latency`` count on the
hot path in plain integers. Only ``exporter`` imports OpenTelemetry, and only when on.
"""
