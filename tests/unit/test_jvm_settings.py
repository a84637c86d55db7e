"""The local driver JVM's settings (analysis.session.jvm_settings) by the size of the traces."""

from __future__ import annotations

from analysis.session import TIERED_INLINING, jvm_settings

GIB = 1 << 30


def _options(rows: int) -> list[str]:
    return jvm_settings(100 << 20, rows, 24 * GIB)["spark.driver.extraJavaOptions"].split()


def test_a_run_of_a_million_messages_compiles_with_c1_alone_and_ten_million_tiered():
    # a synthetic 1M-message run has about 2M trace rows, a 10M-message run 20M
    assert "-XX:TieredStopAtLevel=1" in _options(2_002_716)
    assert "-XX:TieredStopAtLevel=1" in _options(6_000)
    assert not any(o.startswith("-XX:TieredStopAtLevel") for o in _options(6_000_000))
    assert not any(o.startswith("-XX:TieredStopAtLevel") for o in _options(20_026_291))


def test_only_a_tiered_jvm_gets_the_inlining_limits():
    # the limits are for a tiered JVM, whose C2 recompiles what C1 compiled; a C1-only JVM keeps its code
    for option in TIERED_INLINING:
        assert option in _options(20_026_291)
        assert option not in _options(2_002_716)
    # smaller than JDK 17's defaults (FreqInlineSize 325, InlineSmallCode 2500, C1MaxInlineSize 35,
    # C1InlineStackLimit 5), or they change nothing
    limits = {k: int(v) for k, v in (o.removeprefix("-XX:").split("=") for o in TIERED_INLINING)}
    assert limits["FreqInlineSize"] < 325 and limits["InlineSmallCode"] < 2500
    assert limits["C1MaxInlineSize"] < 35 and limits["C1InlineStackLimit"] < 5


def test_the_heap_is_twelve_times_the_parquet_bytes_within_its_bounds():
    assert jvm_settings(100 << 20, 1, 24 * GIB)["spark.driver.memory"] == "1200m"
    assert jvm_settings(1 << 20, 1, 24 * GIB)["spark.driver.memory"] == "1024m"  # at least 1 GiB
    # at most 60 % of the machine: 0.6 x 24 GiB = 14,745.6 MiB, whole MiB
    assert jvm_settings(10 * GIB, 1, 24 * GIB)["spark.driver.memory"] == "14745m"


def test_a_local_driver_writes_no_shuffle_checksums():
    # written to diagnose a cluster's disk and network corruption; one local JVM writes and reads its shuffle
    assert jvm_settings(100 << 20, 1, 24 * GIB)["spark.shuffle.checksum.enabled"] == "false"
