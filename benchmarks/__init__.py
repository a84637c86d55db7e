"""Benchmarks: numbers to record in the docs, not pass/fail tests (`python -m benchmarks.netem`)."""
