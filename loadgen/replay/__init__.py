"""Trace replay: replay files (reading, recording) and the per-producer replay plan."""
from .source import ReplayFileError, ReplayTrace, load_trace

__all__ = ["ReplayFileError", "ReplayTrace", "load_trace"]
