"""`python -m benchmarks.floor RUN_DIR`: what the least an exact analysis of a run costs on this machine.

In one fresh JVM, started and sized as the job starts it (analysis.session.get_spark), the bare
operations no exact analysis of the run can do without, each run twice (cold, then warm):

- starting Spark and running a trivial query;
- reading the message ids of every publish and delivery row (a count of their union);
- grouping those rows by message id, one `bit_or` of the kind and a count per id: the least an exact
  accounting does (the job's ledger groups the same rows with eleven aggregates);
- one pass over the deliveries with six KLL sketches per consumer, the job's sketch (the values
  the sketches hold are read back, so that Spark can not leave the sketching out).

Each line says what the operation found, so that a run can be checked against the job's summary.
Their sum is a floor under the job's time here: it says how much of a target is left for every
other block (benchmarks/NOTES.md), not whether a change helped (pair two commands with
`farm-bench --vs` for that, docs/benchmarks.md).

    python -m benchmarks.floor /tmp/runs/10M
"""

from __future__ import annotations

import argparse
import functools
import operator
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, functions as F

from benchmarks.actions import loadavg

SKETCHED = ("processing_ms", "publish_ns", "receive_ns", "start_ns", "end_ns", "settle_ns")
"""Six numeric delivery columns for the sketch pass (the job sketches six latencies)."""

_PUBLISHED, _DELIVERED = 1, 2


def operations(publishes: DataFrame, deliveries: DataFrame, kll_k: int = 32_768) -> dict[str, Callable[[], Any]]:
    """The bare operations over a run's trace frames, by name; each returns what it found."""
    ids = publishes.select("message_id", F.lit(_PUBLISHED).alias("kind")).unionByName(
        deliveries.select("message_id", F.lit(_DELIVERED).alias("kind"))
    )
    once_each = (F.col("kinds") == _PUBLISHED | _DELIVERED) & (F.col("rows") == 2)

    def grouped() -> int:
        by_id = ids.where(F.col("message_id").isNotNull()).groupBy("message_id")
        rows = by_id.agg(F.bit_or("kind").alias("kinds"), F.count(F.lit(1)).alias("rows"))
        return rows.where(~once_each).count()

    def sketched() -> int:
        sketches = [F.kll_sketch_agg_double(F.col(c).cast("double"), kll_k).alias(c) for c in SKETCHED]
        # The values each sketch holds, read from the sketches: a count of the grouping's rows alone lets
        # Spark drop the sketch aggregates from the plan, and the pass measured no sketching at all.
        held = functools.reduce(operator.add, [F.kll_sketch_get_n_double(c) for c in SKETCHED])
        return deliveries.groupBy("consumer").agg(*sketches).agg(F.sum(held)).first()[0] or 0

    return {
        "rows with an id (publish and delivery)": lambda: ids.agg(F.count("message_id")).first()[0],
        "ids not published once and delivered once": grouped,
        "values sketched (six KLL sketches per consumer)": sketched,
    }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    found = fn()
    return time.perf_counter() - start, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)

    from analysis import traces
    from analysis.session import configure, get_spark, stop_spark

    kinds = traces.scan(args.run_dir)
    size, rows = traces.total_bytes(kinds), traces.total_rows(kinds)
    load_before = loadavg()
    log = Path(tempfile.mkdtemp(prefix="sojourn-floor-")) / "spark.log"
    started, spark = _timed(lambda: get_spark(None, trace_bytes=size, trace_rows=rows, log_path=log))
    try:
        configure(spark, size, rows)
        trivial, _ = _timed(lambda: spark.range(1).count())
        print(f"{args.run_dir}: {rows:,} trace rows, {size / 1e6:,.1f} MB of Parquet; the JVM's log: {log}")
        print(f"{started + trivial:7.1f} s  starting Spark and a trivial query")
        frames = traces.read(spark, kinds)
        for name, operation in operations(frames["publish"], frames["delivery"]).items():
            cold, found = _timed(operation)
            warm, again = _timed(operation)
            assert again == found, f"{name}: {found} then {again}"
            print(f"{cold:7.1f} s  {name}: {found:,} (warm: {warm:.1f} s)")
    finally:
        stop_spark(spark)
    print(f"load {load_before} before, {loadavg()} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
