"""The local driver JVM's settings (analysis.session.jvm_settings) by the size of the traces."""

from analysis.session import jvm_settings

GIB = 1 << 30


def test_the_heap_is_twelve_times_the_parquet_bytes_within_its_bounds():
    assert jvm_settings(100 << 20, 24 * GIB)["spark.driver.memory"] == "1200m"
    assert jvm_settings(1 << 20, 24 * GIB)["spark.driver.memory"] == "1024m"  # at least 1 GiB
    # at most 60 % of the machine: 0.6 x 24 GiB = 14,745.6 MiB, whole MiB
    assert jvm_settings(10 * GIB, 24 * GIB)["spark.driver.memory"] == "14745m"


def test_a_local_driver_writes_no_shuffle_checksums():
    # written to diagnose a cluster's disk and network corruption; one local JVM writes and reads its shuffle
    assert jvm_settings(100 << 20, 24 * GIB)["spark.shuffle.checksum.enabled"] == "false"


def test_the_jvm_starts_with_javas_own_options_but_the_parallel_collector():
    # no JIT or class-archive flags: the analysis runs on a warm server they never reached; the parallel
    # collector keeps a 1 GiB heap from running out on a large task result (session.PARALLEL_GC)
    assert jvm_settings(100 << 20, 24 * GIB)["spark.driver.extraJavaOptions"] == "-XX:+UseParallelGC"


def test_collected_results_may_take_a_quarter_of_the_heap_and_at_least_sparks_own_gibibyte():
    # Spark's default, 1 GiB, failed a 30M-message run's deliveries' cube (1,061 MiB of task results)
    assert jvm_settings(10 * GIB, 24 * GIB)["spark.driver.maxResultSize"] == f"{14745 // 4}m"
    assert jvm_settings(100 << 20, 24 * GIB)["spark.driver.maxResultSize"] == "1024m"  # a 1,200 MiB heap
