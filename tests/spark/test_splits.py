"""analysis.splits simulates how Spark packs a scan's files into partitions: checked here against
Spark's own packing of files of uneven sizes, at several split sizes."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from analysis.splits import partition_bytes

KIB = 1 << 10
OPEN_COST = 64 * KIB


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Nine Parquet files of 30-230 KB (incompressible bytes, so their sizes differ as their rows)."""
    directory = tmp_path_factory.mktemp("splits")
    paths = []
    for i, rows in enumerate([30, 120, 60, 200, 90, 150, 45, 75, 110]):
        table = pa.table({"payload": [os.urandom(1000) for _ in range(rows)]})
        path = directory / f"part-{i}.parquet"
        pq.write_table(table, path, compression="none")
        paths.append(path)
    return paths


@pytest.mark.spark
@pytest.mark.parametrize("split_kib", [250, 300, 450, 700, 4096])  # each above the largest file (no file is cut)
def test_the_simulated_packing_is_sparks(classic_spark, parts, split_kib):
    spark = classic_spark
    keys = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")
    before = {key: spark.conf.get(key, None) for key in keys}
    spark.conf.set(keys[0], str(split_kib * KIB))
    spark.conf.set(keys[1], str(OPEN_COST))
    try:
        frame = spark.read.parquet(*[p.as_uri() for p in parts])
        files = frame.select(F.spark_partition_id().alias("p"), F.col("_metadata.file_path").alias("f")).distinct()
        found: dict[int, set[str]] = {}
        for r in files.collect():
            found.setdefault(r["p"], set()).add(r["f"])
        partitions = frame.rdd.getNumPartitions()
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    sizes = {p.as_uri(): p.stat().st_size for p in parts}
    by_uri = {uri.replace("file:///", "file:/"): size for uri, size in sizes.items()}
    spark_bytes = [sum(by_uri[f.replace("file:///", "file:/")] for f in found[i]) for i in range(partitions)]
    cores = spark.sparkContext.defaultParallelism
    assert spark_bytes == partition_bytes(list(sizes.values()), split_kib * KIB, cores, open_cost=OPEN_COST)
