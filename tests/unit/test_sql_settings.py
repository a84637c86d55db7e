"""One Spark session analyses small and large runs in turn (sweep, nightly, `sojourn analyze A B`):
whatever a small run's settings change, a large run's settings must set back, or the large run is
analysed with one shuffle partition and interpreted expressions."""

import pytest

from analysis.session import SMALL_TRACE_ROWS, sql_settings

SMALL = (400_000, 12_000)  # Parquet bytes, rows: a quickstart run
LARGE = (750_000_000, 20_000_000)  # a 10M-message run


@pytest.mark.parametrize("local", [True, False], ids=["local", "cluster"])
def test_a_large_run_sets_every_key_a_small_run_set(local):
    small, large = sql_settings(*SMALL, local=local), sql_settings(*LARGE, local=local)
    assert SMALL[1] <= SMALL_TRACE_ROWS < LARGE[1]
    assert set(small) <= set(large)
    assert set(large) <= set(small)


@pytest.mark.parametrize("local", [True, False], ids=["local", "cluster"])
def test_small_runs_are_interpreted_on_one_partition_and_large_ones_compiled_on_many(local):
    small, large = sql_settings(*SMALL, local=local), sql_settings(*LARGE, local=local)
    assert (small["spark.sql.codegen.factoryMode"], large["spark.sql.codegen.factoryMode"]) == (
        "NO_CODEGEN",
        "FALLBACK",
    )
    assert (small["spark.sql.codegen.wholeStage"], large["spark.sql.codegen.wholeStage"]) == ("false", "true")
    assert small["spark.sql.shuffle.partitions"] == "1"
    assert large["spark.sql.shuffle.partitions"] == str(-(-750_000_000 // (32 << 20)))  # 23: one per 32 MiB


def test_only_a_cluster_checks_that_a_retried_map_task_wrote_the_same_rows():
    # the order-independent checksum of every shuffled row serves retries, which a local master never makes
    key = "spark.sql.shuffle.orderIndependentChecksum.enabled"
    assert sql_settings(*LARGE, local=True)[key] == "false"
    assert key not in sql_settings(*LARGE, local=False)


@pytest.mark.parametrize("local", [True, False], ids=["local", "cluster"])
def test_every_run_sets_the_scans_split_size_spark_s_default_unless_given_one(local):
    # a session that analysed a large run with a balanced split must not keep it for the next run
    key = "spark.sql.files.maxPartitionBytes"
    assert sql_settings(*SMALL, local=local)[key] == str(128 << 20)
    assert sql_settings(*LARGE, local=local)[key] == str(128 << 20)
    assert sql_settings(*LARGE, local=local, split_bytes=108 << 20)[key] == str(108 << 20)
