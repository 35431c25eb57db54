"""What a broker shows of itself: Prometheus metrics and their HTTP endpoint,
the gauges refreshed from storage, gRPC health, and the log format."""
