"""The Spark session the analysis runs in: local by default, a cluster on request.

Master precedence: the `master` argument, then the SPARK_MASTER environment
variable, then `local[*]`.
"""
from __future__ import annotations

import os

from pyspark.sql import SparkSession

__all__ = ["get_spark", "resolve_master"]

_LOCAL_SHUFFLE_PARTITIONS = "4"


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get("SPARK_MASTER") or "local[*]"


def get_spark(master: str | None = None, app_name: str = "sojourn",
              log_level: str = "ERROR") -> SparkSession:
    """Build (or reuse) a quiet Spark session: no UI, no progress bars, UTC timestamps."""
    resolved = resolve_master(master)
    builder = (
        SparkSession.builder.master(resolved)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if resolved.startswith("local"):
        # A local run needs no network: bind the driver to loopback (this also stops
        # Spark warning that the host name resolves to a loopback address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        # Traces of one run are small: Spark's default 200 shuffle partitions would
        # spend more time scheduling empty tasks than computing. On a cluster the
        # default stands and adaptive execution coalesces partitions.
        builder = builder.config("spark.sql.shuffle.partitions", _LOCAL_SHUFFLE_PARTITIONS)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
