"""Per-message traces: batched Parquet part files under RUN_DIR/traces/<kind>/."""

from loadgen.trace.writer import TraceWriter

__all__ = ["TraceWriter"]
