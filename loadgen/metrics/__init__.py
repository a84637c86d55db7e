"""Live Prometheus metrics of a run (`--metrics-port`): `live` folds trace rows into metrics,
`endpoint` decides the ports and serves them from the trace writer's process (docs/metrics.md)."""
