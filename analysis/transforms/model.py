"""The queueing-model check's inputs measured from the traces (DOMAIN.md §2), and the per-consumer
and per-window breakdowns beside it. The arithmetic on them, and the definitions of p, R and
R_p95, are analysis.summary.model's.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from ._common import Transform
from .stats import percentiles
from .utilisation import busy_ns, wall_ns
from .windows import second_since

__all__ = ["model_inputs", "window_components", "consumer_sojourn_quantiles", "QUANTILES", "COMPONENTS"]

QUANTILES = tuple(round(0.05 * i, 2) for i in range(1, 21))
"""Per-consumer sojourn quantiles: 0.05, 0.10, ..., 1.00 (the last is the max)."""

COMPONENTS = {
    "broker_network": "broker_network_ms",
    "sojourn": "sojourn_ms",
    "processing": "processing_ms_actual",
    "ack_delay": "ack_delay_ms",
}


def model_inputs(t0_ns: int, keys: tuple[str, ...] = ("consumer",)) -> Transform:
    """One row per consumer with the measured inputs and outcomes of the model check.

    Over measured deliveries (warm-up excluded): p (mean processing), p99 processing,
    min broker_network, p95 of the per-second minima, mean sojourn; over all
    deliveries: min/max prefetch, and throughput = acked per second of wall time
    (first receive to last settle). Needs with_delivery_latencies and mark_measured.
    `keys` groups further, e.g. ("consumer", "phase") with the trace's phase column.
    """
    k = list(keys)

    def _inputs(deliveries: DataFrame) -> DataFrame:
        measured = deliveries.where(F.col("measured"))
        per_second = (
            measured.where(F.col("broker_network_ms").isNotNull())
            .groupBy(*k, second_since(t0_ns, "receive_ns").alias("t_s"))
            .agg(F.min("broker_network_ms").alias("_min_bn"))
            .groupBy(*k)
            .agg(F.percentile("_min_bn", 0.95).alias("transit_p95_ms"))
        )  # a row a second: exact
        stats = measured.groupBy(*k).agg(
            F.avg("processing_ms_actual").alias("processing_mean_ms"),
            percentiles(F.col("processing_ms_actual"), [0.99])[0].alias("processing_p99_ms"),
            F.min("broker_network_ms").alias("transit_min_ms"),
            F.avg("sojourn_ms").alias("sojourn_mean_ms"),
        )
        overall = (
            deliveries.groupBy(*k)
            .agg(
                F.min("prefetch").alias("prefetch_min"),
                F.max("prefetch").alias("prefetch_max"),
                F.count_if(F.col("outcome").isin("ack", "auto_ack")).alias("_acked"),
                (F.coalesce(F.max("settle_ns"), F.max("end_ns")) - F.min("receive_ns")).alias("_wall_ns"),
                busy_ns().alias("_busy_ns"),
                wall_ns().alias("_wall_all_ns"),
            )
            .select(
                *k,
                "prefetch_min",
                "prefetch_max",
                F.when(F.col("_wall_ns") > 0, F.col("_acked") / (F.col("_wall_ns") / F.lit(1e9))).alias(
                    "throughput_per_s"
                ),
                F.when(F.col("_wall_all_ns") > 0, F.coalesce("_busy_ns", F.lit(0)) / F.col("_wall_all_ns")).alias(
                    "utilisation"
                ),
            )
        )
        return overall.join(stats, k, "left").join(per_second, k, "left").orderBy(*k)

    return _inputs


def window_components(t0_ns: int) -> Transform:
    """Per second (by processing end, like the windows' latency): the mean of each
    end-to-end component of the deliveries that ended in it. Columns t_s and one
    `<component>` mean per COMPONENTS key."""

    def _components(deliveries: DataFrame) -> DataFrame:
        return (
            deliveries.where(F.col("end_ns").isNotNull())
            .groupBy(second_since(t0_ns, "end_ns").alias("t_s"))
            .agg(*[F.avg(col).alias(name) for name, col in COMPONENTS.items()])
            .orderBy("t_s")
        )

    return _components


def consumer_sojourn_quantiles(deliveries: DataFrame) -> DataFrame:
    """Per consumer: sojourn quantiles (stats.percentiles) at QUANTILES over measured deliveries
    (column `sojourn_quantiles_ms`, an array; null when it has none)."""
    return (
        deliveries.where(F.col("measured") & F.col("sojourn_ms").isNotNull())
        .groupBy("consumer")
        .agg(percentiles(F.col("sojourn_ms"), QUANTILES).alias("sojourn_quantiles_ms"))
        .orderBy("consumer")
    )
