"""The Spark session the analysis runs in: local by default, a cluster on request, sized to the traces.

Master precedence: the `master` argument, then the SPARK_MASTER environment
variable, then `local[*]`.

Two kinds of settings are derived from the size of the traces (docs/analysis.md, "Settings"):

- the driver JVM's (its heap), fixed when the JVM starts: `jvm_settings`;
- the SQL settings (shuffle partitions, adaptive execution, code generation), which the job
  sets again for every run it analyses on a session: `sql_settings`.

The JVM's own output (log4j, its warnings at start) goes to a log file when one is named, not
to the user's terminal.

The JVM starts with Java's defaults but for its collector (PARALLEL_GC): the class archives and
the JIT flags chosen by row count served a JVM started for every analysis; the analysis now runs
on a warm server (analysis.server), which none of them reached.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from analysis import py4j_log
from analysis.splits import DEFAULT_SPLIT_BYTES, balanced_split_bytes

__all__ = [
    "get_spark",
    "connected",
    "is_connect",
    "stop_spark",
    "configure",
    "resolve_master",
    "jvm_settings",
    "max_result_size",
    "sql_settings",
    "total_memory_bytes",
    "java_binary",
    "SMALL_TRACE_ROWS",
    "LOG_NAME",
]

LOG_NAME = "spark.log"
"""The JVM's log, in the (first) run directory the session analyses."""

SMALL_TRACE_ROWS = 100_000
"""Up to this many trace rows, a JVM lives for seconds: one shuffle partition, no adaptive
re-planning and no whole-stage code generation cost less than they save. Above it they cost more:
a synthetic 100k-message run (200,000 rows) took 0.82 of the time with the larger traces' settings,
a 50k-message run (100,000 rows) 0.98 (paired, docs/benchmarks.md)."""

PARALLEL_GC = "-XX:+UseParallelGC"
"""The one JVM option kept, for its heap rather than its speed: with Java's default collector (G1) a
1M-message run analysed in a Spark of the command's own ran its 1 GiB heap out of memory fetching a
task result (a large buffer, which G1 must place in contiguous regions; 2026-12-04, both rounds of
`python -m benchmarks analysis`), where the parallel collector's whole heap serves it."""

_MIB = 1 << 20
_GIB = 1 << 30
_MIN_HEAP = 1 * _GIB
_HEAP_PER_TRACE_BYTE = 12  # Parquet is compressed several times over; the job caches two frames
_MAX_HEAP_SHARE = 0.6  # of the machine's memory: the broker and the OS keep the rest
_BYTES_PER_PARTITION = 32 * _MIB


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get("SPARK_MASTER") or "local[*]"


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):  # not POSIX: assume a small machine
        return 8 * _GIB


def java_binary() -> str | None:
    """The java that Spark's launcher starts: JAVA_HOME's, else the first on PATH; None when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return java if java and os.path.exists(java) else None


def max_result_size(heap_mib: int) -> str:
    """`spark.driver.maxResultSize` for a driver of `heap_mib`: a quarter of its heap. Spark's own
    1 GiB failed a 30M-message run's analysis (2026-12-05: the deliveries' cube, 1,061 MiB of task
    results), where the warm server's heap is 12 GiB on this machine."""
    return f"{max(1024, heap_mib // 4)}m"


def jvm_settings(trace_bytes: int, machine_bytes: int) -> dict[str, str]:
    """The local driver's JVM settings for traces of this size (Parquet bytes on disk).

    Heap: 12x the Parquet bytes, at least 1 GiB, at most 60 % of the machine's memory; what
    does not fit spills to local disk. Collected results up to a quarter of it (max_result_size).
    The parallel collector (PARALLEL_GC). No shuffle checksums.
    """
    heap = max(_MIN_HEAP, min(_HEAP_PER_TRACE_BYTE * trace_bytes, int(_MAX_HEAP_SHARE * machine_bytes)))
    heap_mib = heap // _MIB
    return {
        "spark.driver.memory": f"{heap_mib}m",
        "spark.driver.maxResultSize": max_result_size(heap_mib),
        "spark.driver.extraJavaOptions": PARALLEL_GC,
        # The shuffle files' checksums diagnose corruption on a cluster's disks and network; a local
        # shuffle is written and read by one JVM within seconds.
        "spark.shuffle.checksum.enabled": "false",
    }


def sql_settings(
    trace_bytes: int, trace_rows: int, local: bool, split_bytes: int = DEFAULT_SPLIT_BYTES
) -> dict[str, str]:
    """SQL settings for one analysis. Small traces: one shuffle partition and no adaptive
    re-planning or code generation (each action is a few ms of work; planning and compiling are
    the cost), on a cluster too. Larger traces: a partition per 32 MiB of Parquet (at least 4);
    adaptive execution coalesces what turns out small. Every key is set for both, since one session
    analyses runs of both sizes in turn (configure). `split_bytes`: the scans' largest partition
    (analysis.splits.balanced_split_bytes)."""
    small = trace_rows <= SMALL_TRACE_ROWS
    settings = {
        # The job's caches are built once and read a dozen times: compressing them cost twice the
        # build time (a million deliveries: 2.8 s against 1.4 s) and saved nothing on the reads.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.adaptive.enabled": "false" if small else "true",
        "spark.sql.codegen.wholeStage": "false" if small else "true",
        # Small traces: projections and predicates interpreted rather than compiled, since compiling
        # each query's generated classes cost more than evaluating a few thousand rows. Set both ways:
        # a session analyses small and large runs in turn.
        "spark.sql.codegen.factoryMode": "NO_CODEGEN" if small else "FALLBACK",
        # A broadcast is a job of its own; small traces join within the one job of their query.
        "spark.sql.autoBroadcastJoinThreshold": "-1" if small else "10MB",
    }
    # A few thousand rows: one partition; more: one per 32 MiB of Parquet (at least 4). On a cluster
    # too: a session that analysed a small run must not keep one partition for a large one.
    settings["spark.sql.shuffle.partitions"] = "1" if small else str(max(4, -(-trace_bytes // _BYTES_PER_PARTITION)))
    settings["spark.sql.files.maxPartitionBytes"] = str(split_bytes)
    if local:
        # A run's part files are many and local: listing them is no job for a cluster of tasks.
        settings["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "1000000"
        # A checksum of every shuffled row, order-independent, lets a cluster tell whether a retried
        # map task wrote other rows than the first attempt; a local master does not retry tasks.
        settings["spark.sql.shuffle.orderIndependentChecksum.enabled"] = "false"
    return settings


def get_spark(
    master: str | None = None,
    app_name: str = "sojourn",
    log_level: str = "ERROR",
    trace_bytes: int = 0,
    trace_rows: int = 0,
    log_path: str | Path | None = None,
) -> SparkSession:
    """Build (or reuse) a quiet Spark session: no UI, no progress bars, UTC timestamps.

    A new local JVM is sized for `trace_bytes` (jvm_settings); a JVM that is
    already running keeps its size. With `log_path`, a JVM this call starts writes its output
    there (log level WARN) instead of to the terminal, and so does py4j (analysis.py4j_log).
    """
    resolved = resolve_master(master)
    conf = (
        SparkConf()
        .setMaster(resolved)
        .setAppName(app_name)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.session.timeZone", "UTC")
        # PySpark sends the Python call site of every column expression to the JVM (up to a
        # dozen round trips per `F.col`) for error messages: most of the time the job spends
        # building its plans. The analysis's own errors name the file and field instead.
        .set("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    local = resolved.startswith("local")
    if local:
        # A local run needs no network: bind the driver to loopback (this also stops
        # Spark warning that the host name resolves to a loopback address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
        if "PYSPARK_SUBMIT_ARGS" not in os.environ:  # a caller's own JVM options win
            conf.setAll(list(jvm_settings(trace_bytes, total_memory_bytes()).items()))
    conf.setAll(list(sql_settings(trace_bytes, trace_rows, local).items()))
    if SparkContext._active_spark_context is None and log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        py4j_log.to_log_file(log_path)
        with open(log_path, "ab") as log:
            _start_jvm(conf, log)
        log_level = "WARN"
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


@contextlib.contextmanager
def connected(url: str, alive: Callable[[], bool] | None = None) -> Iterator[SparkSession]:
    """A new session on the Spark Connect server at `url` (sc://HOST:PORT, with `/;token=...` where
    the server wants one), its timestamps in UTC; released on the server at the end. pyspark marks
    the process as a Connect client while it lasts (SPARK_CONNECT_MODE_ENABLED: `functions` then
    build Connect columns), and no longer after, so that a Spark of this process can follow.

    `alive`: whether the server's process still runs (a local server's). The client retries a call
    the server did not answer for up to ten minutes, for a network's sake; with `alive` it retries
    only while the server runs, so that an analysis on a server that died fails at once.

    gRPC's fork handlers, which the Connect client brings, restart gRPC's poller in a child made by
    fork() (pyspark's own JVM launch with its preexec_fn, multiprocessing's fork), which then
    sometimes aborted or hung before it could exec: 22 and 55 of 400 such children with a session
    open (grpcio 1.85, 2026-12-05; grpc/grpc#43055), none of 400 with the handlers off. Neither
    sojourn nor such a child uses gRPC after a fork, so the handlers go, unless the environment says
    otherwise: set here, before the client's first import of grpc, which reads it then, and only in
    a process that becomes a Connect client (not in a load generator's, nor its users' code). gRPC
    keeps what it read for the process; the variable goes again at the end, so that the children
    this process starts later (a sweep's next load generator) get the environment they had."""
    forks_unset = "GRPC_ENABLE_FORK_SUPPORT" not in os.environ
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    marked = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    spark = SparkSession.builder.remote(url).create()
    try:
        if alive is not None:
            spark.client.set_retry_policies([_retrying_while(alive)])
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        yield spark
    finally:
        with contextlib.suppress(Exception):  # a server that is gone has nothing to release
            spark.stop()
        if not marked:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        if forks_unset:
            os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)


def _retrying_while(alive: Callable[[], bool]) -> Any:
    """Spark Connect's default retry policy, retrying only while `alive()`."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class WhileAlive(DefaultPolicy):
        def can_retry(self, e: BaseException) -> bool:
            return bool(super().can_retry(e)) and alive()

    return WhileAlive()


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect client's session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def configure(
    spark: SparkSession, trace_bytes: int, trace_rows: int, kind_file_bytes: Sequence[Sequence[int]] = ()
) -> None:
    """Set the SQL settings for the traces about to be analysed (sql_settings) on `spark`.
    `kind_file_bytes`: the bytes of each file of the kinds the job scans most (the deliveries, the
    publishes): past SMALL_TRACE_ROWS rows on a local master, the scans are split so that their
    tasks spread evenly over its cores (analysis.splits)."""
    master = spark.conf.get("spark.master") if is_connect(spark) else spark.sparkContext.master
    assert master is not None  # a running Spark has a master: it does not start without one
    local = master.startswith("local")
    split = DEFAULT_SPLIT_BYTES
    if local and kind_file_bytes and trace_rows > SMALL_TRACE_ROWS:
        cores = _local_cores(master) if is_connect(spark) else spark.sparkContext.defaultParallelism
        split = balanced_split_bytes(kind_file_bytes, cores)
    for key, value in sql_settings(trace_bytes, trace_rows, local, split).items():
        spark.conf.set(key, value)


def _local_cores(master: str) -> int:
    """The task slots of a local master: local[N], local[*] (every core), local (one)."""
    inside = master.partition("[")[2].partition("]")[0].partition(",")[0]
    if inside in ("", "*"):
        return 1 if master == "local" else os.cpu_count() or 1
    return int(inside)


def _start_jvm(conf: SparkConf, log: IO[bytes]) -> None:
    """Start the driver JVM with its stdout and stderr on `log` (pyspark's documented hook)."""
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    SparkContext(conf=conf, gateway=gateway)


def stop_spark(spark: SparkSession) -> None:
    """Stop the session: a Spark of this process (pyspark starts a new JVM for a later session), or
    a Spark Connect session, released on its server, which stays up."""
    spark.stop()
    if not is_connect(spark):
        py4j_log.stop_logging()
