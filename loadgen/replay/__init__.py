"""Trace replay: replay files (reading, recording) and the per-producer replay plan."""

from .plan import SPLITS, ReplayItem, expected_count, plan, slot_of
from .source import ReplayFileError, ReplayTrace, load_trace

__all__ = ["ReplayFileError", "ReplayTrace", "load_trace", "ReplayItem", "SPLITS", "plan", "expected_count", "slot_of"]
