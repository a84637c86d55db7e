"""Trace replay: replay files (reading, recording) and the per-producer replay plan."""
