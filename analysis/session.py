"""The Spark session the analysis runs in: local by default, a cluster on request, sized to the traces.

Master precedence: the `master` argument, then the SPARK_MASTER environment
variable, then `local[*]`.

Two kinds of settings are derived from the size of the traces (docs/analysis.md, "Settings"):

- the driver JVM's (heap, JIT, garbage collector), fixed when the JVM starts: `jvm_settings`;
- the SQL settings (shuffle partitions, adaptive execution, code generation), which the job
  sets again for every run it analyses on a session: `sql_settings`.

The JVM's own output (log4j, its warnings at start) goes to a log file when one is named, not
to the user's terminal.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

__all__ = ["get_spark", "configure", "resolve_master", "jvm_settings", "sql_settings", "total_memory_bytes",
           "SMALL_TRACE_ROWS", "LOG_NAME"]

LOG_NAME = "spark.log"
"""The JVM's log, in the (first) run directory the session analyses."""

SMALL_TRACE_ROWS = 300_000
"""Up to this many trace rows, a JVM lives for seconds: C1 alone, one shuffle partition, no
adaptive re-planning and no whole-stage code generation cost less than they save."""

_MIB = 1 << 20
_GIB = 1 << 30
_MIN_HEAP = 1 * _GIB
_HEAP_PER_TRACE_BYTE = 8       # Parquet is compressed several times over; the job caches two frames
_MAX_HEAP_SHARE = 0.6          # of the machine's memory: the broker and the OS keep the rest
_BYTES_PER_PARTITION = 32 * _MIB


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get("SPARK_MASTER") or "local[*]"


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):  # not POSIX: assume a small machine
        return 8 * _GIB


def jvm_settings(trace_bytes: int, trace_rows: int, machine_bytes: int) -> dict[str, str]:
    """The local driver's JVM settings for traces of this size (Parquet bytes on disk, rows).

    Heap: 8x the Parquet bytes, at least 1 GiB, at most 60 % of the machine's memory; what
    does not fit spills to local disk. Small traces get the C1 compiler only (the JVM lives
    for seconds; C2 would compile for longer than it runs); large ones keep tiered
    compilation. The parallel collector suits a batch job better than G1's pause goals.
    """
    heap = max(_MIN_HEAP, min(_HEAP_PER_TRACE_BYTE * trace_bytes, int(_MAX_HEAP_SHARE * machine_bytes)))
    heap_mib = heap // _MIB
    options = ["-XX:+UseParallelGC"]
    if trace_rows <= SMALL_TRACE_ROWS:
        options.append("-XX:TieredStopAtLevel=1")
    return {"spark.driver.memory": f"{heap_mib}m",
            "spark.driver.extraJavaOptions": " ".join(options)}


def sql_settings(trace_bytes: int, trace_rows: int, local: bool) -> dict[str, str]:
    """SQL settings for one analysis. Small traces: one shuffle partition and no adaptive
    re-planning or whole-stage code generation (each action is a few ms of work; planning and
    compiling are the cost), on a cluster too. Larger traces: locally a partition per 32 MiB of
    Parquet (at least 4), on a cluster Spark's own count; adaptive execution coalesces what
    turns out small."""
    small = trace_rows <= SMALL_TRACE_ROWS
    settings = {
        "spark.sql.adaptive.enabled": "false" if small else "true",
        "spark.sql.codegen.wholeStage": "false" if small else "true",
        # A broadcast is a job of its own; small traces join within the one job of their query.
        "spark.sql.autoBroadcastJoinThreshold": "-1" if small else "10MB",
    }
    if small:  # a few thousand rows: one partition anywhere, a cluster included
        settings["spark.sql.shuffle.partitions"] = "1"
    elif local:
        settings["spark.sql.shuffle.partitions"] = str(max(4, -(-trace_bytes // _BYTES_PER_PARTITION)))
    if local:
        # A run's part files are many and local: listing them is no job for a cluster of tasks.
        settings["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "1000000"
    return settings


def get_spark(master: str | None = None, app_name: str = "sojourn", log_level: str = "ERROR",
              trace_bytes: int = 0, trace_rows: int = 0, log_path: Path | None = None) -> SparkSession:
    """Build (or reuse) a quiet Spark session: no UI, no progress bars, UTC timestamps.

    A new local JVM is sized for `trace_bytes` / `trace_rows` (jvm_settings); a JVM that is
    already running keeps its size. With `log_path`, a JVM this call starts writes its output
    there (log level WARN) instead of to the terminal.
    """
    resolved = resolve_master(master)
    conf = (SparkConf().setMaster(resolved).setAppName(app_name)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.sql.session.timeZone", "UTC"))
    local = resolved.startswith("local")
    if local:
        # A local run needs no network: bind the driver to loopback (this also stops
        # Spark warning that the host name resolves to a loopback address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
        if "PYSPARK_SUBMIT_ARGS" not in os.environ:  # a caller's own JVM options win
            conf.setAll(jvm_settings(trace_bytes, trace_rows, total_memory_bytes()).items())
    conf.setAll(sql_settings(trace_bytes, trace_rows, local).items())
    if SparkContext._active_spark_context is None and log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            _start_jvm(conf, log)
        log_level = "WARN"
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def configure(spark: SparkSession, trace_bytes: int, trace_rows: int) -> None:
    """Set the SQL settings for the traces about to be analysed (sql_settings) on `spark`."""
    local = spark.sparkContext.master.startswith("local")
    for key, value in sql_settings(trace_bytes, trace_rows, local).items():
        spark.conf.set(key, value)


def _start_jvm(conf: SparkConf, log: IO[bytes]) -> None:
    """Start the driver JVM with its stdout and stderr on `log` (pyspark's documented hook)."""
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    SparkContext(conf=conf, gateway=gateway)
