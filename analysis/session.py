"""The Spark session the analysis runs in: local by default, a cluster on request, sized to the traces.

Master precedence: the `master` argument, then the SPARK_MASTER environment
variable, then `local[*]`.

Two kinds of settings are derived from the size of the traces (docs/analysis.md, "Settings"):

- the driver JVM's (heap, JIT, garbage collector), fixed when the JVM starts: `jvm_settings`;
- the SQL settings (shuffle partitions, adaptive execution, code generation), which the job
  sets again for every run it analyses on a session: `sql_settings`.

The JVM's own output (log4j, its warnings at start) goes to a log file when one is named, not
to the user's terminal.

A local JVM starts from a class-data-sharing archive of the classes an analysis loads (Java's
AppCDS: `-XX:SharedArchiveFile`), kept per Java and pyspark install in the user's cache
directory: starting Spark and running its first queries load some ten thousand classes, and
mapping them from the archive saves about 3 s of every analysis on this project's 2-core machine.
The first analysis with a new install writes the archive when its JVM exits (about 20 s more, once).
`SOJOURN_SPARK_CDS=0` turns this off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from pyspark import SparkConf, SparkContext
from pyspark.sql import DataFrame, SparkSession

from analysis import py4j_log
from analysis.splits import DEFAULT_SPLIT_BYTES, balanced_split_bytes

__all__ = [
    "get_spark",
    "connected",
    "is_connect",
    "stop_spark",
    "sibling",
    "moved",
    "configure",
    "resolve_master",
    "jvm_settings",
    "sql_settings",
    "total_memory_bytes",
    "class_archive",
    "put_in_place",
    "KEPT_ARCHIVES",
    "java_binary",
    "SMALL_TRACE_ROWS",
    "C1_ONLY_TRACE_ROWS",
    "TIERED_INLINING",
    "LOG_NAME",
]

LOG_NAME = "spark.log"
"""The JVM's log, in the (first) run directory the session analyses."""

SMALL_TRACE_ROWS = 100_000
"""Up to this many trace rows, a JVM lives for seconds: one shuffle partition, no adaptive
re-planning and no whole-stage code generation cost less than they save. Above it they cost more:
a synthetic 100k-message run (200,000 rows) took 0.82 of the time with the larger traces' settings,
a 50k-message run (100,000 rows) 0.98 (paired, docs/benchmarks.md)."""

C1_ONLY_TRACE_ROWS = 2_500_000
"""Up to this many trace rows the JIT compiles with C1 alone: C2's compiler threads took the two
cores from the tasks for longer than its faster code saved (a synthetic 1M-message run, 2M rows:
docs/benchmarks.md); a 3M-message run (6M rows) took 201 s with C1 alone against 137 s tiered."""

TIERED_INLINING = (
    "-XX:FreqInlineSize=100",
    "-XX:InlineSmallCode=800",
    "-XX:C1MaxInlineSize=20",
    "-XX:C1InlineStackLimit=3",
)
"""For a tiered JVM: C2 inlines hot methods of up to 100 bytecodes (JDK 17's default: 325) and no
callee whose compiled code is over 800 bytes (2,500). C2's compiler thread took a fifth of the
JVM's CPU on a 10M-message run, compiling Spark's, Janino's and the JDK's code beside the queries'
generated classes; with less inlining it compiles each method in less time, and the run took 0.88
of the time. C1's profiling code, which C2 replaces where it matters, inlines methods of up to 20
bytecodes (35) three calls deep (5): the run took a further 0.955 of its time (six pairs, 0.89-1.04;
docs/benchmarks.md)."""

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


_ARCHIVE_PREFIX = "spark-classes-"
"""The start of every class archive's file name in the cache directory (class_archive, put_in_place)."""


def class_archive() -> Path | None:
    """Where this Java and pyspark install's class archive lives (it may not exist yet), or None
    when archives are off (SOJOURN_SPARK_CDS=0) or no Java is found. Named after what it depends
    on: the pyspark install (path, version, and the size and time of each of its jars) and the Java
    binary (path, size and time), so a new install of either gets an archive of its own. The JVM
    checks the jars' sizes and times against the archive's and, finding another install's, starts
    without it, silently (-Xlog:cds=off): pyspark installed again at the same path and version
    (scripts/setup.sh makes a new venv) started Spark in 3.5 s instead of 1.8 s on every run."""
    import pyspark

    if os.environ.get("SOJOURN_SPARK_CDS", "1") == "0":
        return None
    java = java_binary()
    if java is None:
        return None
    java = os.path.realpath(java)
    stat = os.stat(java)
    install = os.path.dirname(os.path.realpath(pyspark.__file__))
    key = hashlib.sha1(f"{install}|{pyspark.__version__}|{java}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    key.update(_jars_stamp(Path(install) / "jars").encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sojourn"
    return cache / f"{_ARCHIVE_PREFIX}{key.hexdigest()[:16]}.jsa"


def java_binary() -> str | None:
    """The java that Spark's launcher starts: JAVA_HOME's, else the first on PATH; None when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return java if java and os.path.exists(java) else None


def _jars_stamp(jars: Path) -> str:
    """The name, size and time of each jar in `jars` (Spark's class path), in name order; empty
    when the directory is missing."""
    try:
        entries = sorted((e.name, e.stat()) for e in os.scandir(jars) if e.name.endswith(".jar"))
    except OSError:
        return ""
    return "|".join(f"{name}:{st.st_size}:{st.st_mtime_ns}" for name, st in entries)


def _archive_options(archive: Path | None) -> list[str]:
    """-XX options that use the class archive, or write it at exit (to a file of this process's
    own, renamed into place by stop_spark) when there is none yet."""
    if archive is None:
        return []
    if archive.is_file():
        with contextlib.suppress(OSError):
            os.utime(archive)  # its time says when it was last used (put_in_place keeps the recent ones)
        return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        for other in archive.parent.glob(f"{archive.name}.*.tmp"):
            if time.time() - other.stat().st_mtime > _STALE_PENDING_S:
                other.unlink()  # its process never renamed it: it stopped without stop_spark
            else:
                return []  # another JVM is writing the archive now
    except OSError:
        return []
    # Classes from signed jars and old class files can not be archived: the JVM says so per class.
    return [f"-XX:ArchiveClassesAtExit={_pending(archive)}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


_STALE_PENDING_S = 600

KEPT_ARCHIVES = 3
"""How many class archives (the most recently used) stay in the cache directory once a new one is
written: each is about 180 MB, and every new Java or pyspark install (a fresh clone's venv) writes
its own, which nothing else would remove."""


def _pending(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.{os.getpid()}.tmp")


def put_in_place(pending: Path, archive: Path) -> None:
    """Rename the archive a JVM wrote at its exit into place, and remove the archives of other
    installs beyond the KEPT_ARCHIVES most recently used (an archive's time is its last use:
    _archive_options touches it). Archives being written (`.tmp`) are left alone."""
    os.replace(pending, archive)
    try:
        archives = [(p.stat().st_mtime, p) for p in archive.parent.glob(f"{_ARCHIVE_PREFIX}*.jsa")]
    except OSError:
        return
    for _, old in sorted(archives, reverse=True)[KEPT_ARCHIVES:]:
        if old != archive:
            with contextlib.suppress(OSError):
                old.unlink()


def jvm_settings(trace_bytes: int, trace_rows: int, machine_bytes: int, archive: Path | None = None) -> dict[str, str]:
    """The local driver's JVM settings for traces of this size (Parquet bytes on disk, rows).

    Heap: 12x the Parquet bytes, at least 1 GiB, at most 60 % of the machine's memory; what
    does not fit spills to local disk. Traces up to C1_ONLY_TRACE_ROWS get the C1 compiler only
    (C2 would compile for longer than it saves); larger ones keep tiered compilation, C1 and C2 inlining
    less than their defaults (TIERED_INLINING). The
    parallel collector suits a batch job better than G1's pause goals. No shuffle checksums.
    `archive`: the class archive to start from, or to write at exit (class_archive).
    """
    heap = max(_MIN_HEAP, min(_HEAP_PER_TRACE_BYTE * trace_bytes, int(_MAX_HEAP_SHARE * machine_bytes)))
    heap_mib = heap // _MIB
    options = ["-XX:+UseParallelGC"]
    if trace_rows <= C1_ONLY_TRACE_ROWS:
        options.append("-XX:TieredStopAtLevel=1")
    else:
        options += TIERED_INLINING
    options += _archive_options(archive)
    return {
        "spark.driver.memory": f"{heap_mib}m",
        "spark.driver.extraJavaOptions": " ".join(options),
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
    # Percentile sketches per second of the run are aggregated by hashing; past 128 groups (Spark's
    # default) a task would sort its rows instead. Their memory is bounded by the rows, which the heap
    # is sized for.
    settings["spark.sql.objectHashAggregate.sortBased.fallbackThreshold"] = "128" if small else "1000000"
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

    A new local JVM is sized for `trace_bytes` / `trace_rows` (jvm_settings); a JVM that is
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
            conf.setAll(list(jvm_settings(trace_bytes, trace_rows, total_memory_bytes(), class_archive()).items()))
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
    only while the server runs, so that an analysis on a server that died fails at once."""
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


def sibling(spark: SparkSession) -> SparkSession:
    """A session of `spark`'s Spark context (the same JVM, executors and cached frames) with a SQL
    configuration of its own, a copy of `spark`'s as it is now: its queries are planned with these
    settings whatever `spark`'s become later (the job changes a few of them while it plans its
    accounting, and runs other blocks beside it in a sibling). On Spark Connect, `spark` itself: its
    sessions share no plans, so a setting the accounting changes may reach a sibling block's plan
    (its speed, never its numbers)."""
    if is_connect(spark):
        return spark
    other = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key.startswith("spark.sql.") and other.conf.isModifiable(key):
            other.conf.set(key, value)
    return other


def moved(frame: DataFrame, spark: SparkSession) -> DataFrame:
    """`frame` as a frame of `spark`: the same plan, so the same cached data (the cache is the Spark
    context's), planned and run with `spark`'s settings. pyspark has no public call for this; Spark's
    own `Dataset.ofRows` makes a frame of a session from a plan. On Spark Connect (see sibling), `frame`."""
    if is_connect(spark):
        return frame
    dataset = spark._jvm.org.apache.spark.sql.classic.Dataset  # type: ignore[union-attr]
    return DataFrame(dataset.ofRows(spark._jsparkSession, frame._jdf.logicalPlan()), spark)


def _start_jvm(conf: SparkConf, log: IO[bytes]) -> None:
    """Start the driver JVM with its stdout and stderr on `log` (pyspark's documented hook)."""
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    SparkContext(conf=conf, gateway=gateway)


_EXIT_WAIT_S = 120


def stop_spark(spark: SparkSession) -> None:
    """Stop the session. A JVM this process started that writes the class archive at its exit is
    let exit (its input closed, as when Python exits) and waited for, and the archive renamed into
    place; pyspark starts a new JVM for a later session in this process. A Spark Connect session is
    released on its server, which stays up."""
    if is_connect(spark):
        spark.stop()
        return
    gateway = SparkContext._gateway
    if gateway is None:
        return  # an earlier stop_spark let this session's JVM exit (sessions in one process share it)
    spark.stop()
    py4j_log.stop_logging()
    archive = class_archive()
    pending = _pending(archive) if archive is not None else None
    proc = getattr(gateway, "proc", None)
    if pending is None or proc is None or not any(str(pending) in str(a) for a in proc.args):
        return
    try:
        proc.stdin.close()  # the JVM exits at the end of its input (pyspark's PythonGatewayServer)
        proc.wait(timeout=_EXIT_WAIT_S)
    except (OSError, subprocess.TimeoutExpired):
        return
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
    if pending.is_file() and pending.stat().st_size > 0:
        assert archive is not None  # pending is only set from an archive
        put_in_place(pending, archive)
