"""Per-second windows since t0: counts and latency percentiles second by second.

One row per whole second from the first to the last second with any activity (warm-up and drain
included; seconds without activity are filled with zeros): the seconds' projections of the cubes
(delivery_cube.window_projections, `published_per_s`), rolled up by summary.deliveries.
"""

from __future__ import annotations

from pyspark.sql import Column, functions as F

from ._common import NS_PER_S

__all__ = ["second_since", "WINDOW_SOJOURN_FIELDS", "WINDOW_LATENCY_FIELDS", "COMPONENTS"]

WINDOW_SOJOURN_FIELDS = ("p50", "p95", "p99", "max")
WINDOW_LATENCY_FIELDS = ("p50", "p99")
COMPONENTS = {
    "broker_network": "broker_network_ms",
    "sojourn": "sojourn_ms",
    "socket_wait": "socket_wait_ms",  # a part of the sojourn (the report stacks it apart)
    "processing": "processing_ms_actual",
    "ack_delay": "ack_delay_ms",
}
"""The end-to-end components whose per-second means a window carries (`components_ms`)."""


def second_since(t0_ns: int, time_col: str) -> Column:
    """floor((time - t0) / 1 s), as a long; null when the time is null."""
    return F.floor((F.col(time_col) - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).cast("long")
