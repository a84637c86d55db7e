"""Per-row derived latencies in milliseconds (definitions in docs/summary.md)."""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from ._common import ms_between

__all__ = ["with_delivery_latencies", "with_confirm_latency", "DELIVERY_LATENCY_COLUMNS"]

DELIVERY_LATENCY_COLUMNS = (
    "sojourn_ms",
    "socket_wait_ms",
    "broker_network_ms",
    "processing_ms_actual",
    "ack_delay_ms",
    "end_to_end_ms",
)


def with_delivery_latencies(deliveries: DataFrame) -> DataFrame:
    """Add the delivery latencies; a latency is null when one of its two times is missing.

    `ack_delay_ms` is only defined for manual acknowledgement: with auto-ack the
    settle time is the receive time, so `settle - end` would be meaningless.
    `processing_ms_actual` is the measured processing time, next to the trace's
    drawn `processing_ms`. `socket_wait_ms` is the part of the sojourn the bytes waited in the
    consumer's socket before its process read them (receive_ns is the kernel's stamp); null
    in a trace without read_ns (before schema version 5).
    """
    return deliveries.withColumns(
        {
            "sojourn_ms": ms_between("start_ns", "receive_ns"),
            "socket_wait_ms": ms_between("read_ns", "receive_ns"),
            "broker_network_ms": ms_between("receive_ns", "publish_ns"),
            "processing_ms_actual": ms_between("end_ns", "start_ns"),
            "ack_delay_ms": F.when(F.col("outcome") != "auto_ack", ms_between("settle_ns", "end_ns")),
            "end_to_end_ms": ms_between("end_ns", "publish_ns"),
        }
    )


def with_confirm_latency(publishes: DataFrame) -> DataFrame:
    """Add `confirm_ms`: from basic.publish to the broker's confirm (null without one)."""
    return publishes.withColumn("confirm_ms", ms_between("confirm_ns", "publish_ns"))
