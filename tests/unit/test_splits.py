"""The scan split size: Spark's packing of files into partitions, simulated, and the split size
that ends a scan's tasks together on the local cores (analysis.splits). Expected values are
worked by hand from Spark's rule (tests/spark/test_splits.py checks the rule against Spark)."""

from analysis.splits import (
    DEFAULT_SPLIT_BYTES,
    balanced_split_bytes,
    partition_bytes,
    rounds_bytes,
)

MIB = 1 << 20


def test_files_fill_a_partition_while_the_next_fits_counting_each_files_open_cost():
    # each 10 MiB file fills 14 MiB (its open cost is 4): 0+10, 14+10, 28+10 fit in 40; 42+10 does not
    assert partition_bytes([10 * MIB] * 10, 40 * MIB, cores=1) == [30 * MIB, 30 * MIB, 30 * MIB, 10 * MIB]


def test_a_file_larger_than_the_split_is_cut_into_splits():
    assert partition_bytes([100 * MIB], 40 * MIB, cores=1) == [40 * MIB, 40 * MIB, 20 * MIB]


def test_the_split_is_capped_at_the_scans_bytes_per_core():
    # 4 files of 10 MiB cost 56 MiB with their open costs: 28 MiB a core on two cores, under the 128 asked
    assert partition_bytes([10 * MIB] * 4, DEFAULT_SPLIT_BYTES, cores=2) == [20 * MIB, 20 * MIB]


def test_tasks_start_in_order_on_the_first_free_core():
    assert rounds_bytes([5, 5, 5], cores=2) == 10
    assert rounds_bytes([6, 3, 3], cores=2) == 6
    assert rounds_bytes([6, 3, 3], cores=1) == 12


def test_a_10m_runs_deliveries_make_an_even_number_of_partitions_that_end_together():
    files = [4_800_000] * 100  # the synthetic 10M run's delivery parts are 4.7-4.8 MB each
    # By hand: a file costs 4,800,000 + 4 MiB; at 128 MiB 15 files fit a partition (14 costs + one file's
    # bytes <= 128 MiB < 15 costs + one), so 100 files make 6 partitions of 15 and one of 10: on two cores
    # the last round runs the one of 10 alone, 55 files' work against 50 evenly.
    assert len(partition_bytes(files, DEFAULT_SPLIT_BYTES, 2)) == 7
    assert rounds_bytes(partition_bytes(files, DEFAULT_SPLIT_BYTES, 2), 2) == 55 * 4_800_000
    split = balanced_split_bytes([files], cores=2)
    partitions = partition_bytes(files, split, 2)
    # No more than the default's 7 rounded up to whole rounds of two cores: equal files pack as whole
    # partitions of k files and one of the rest, and 8 partitions hold at best 13 x 7 and 9, 52 files on
    # the busier core (14 a partition leaves 2 for the eighth: 56 files; 12 makes nine partitions).
    assert len(partitions) == 8
    assert rounds_bytes(partitions, 2) == 52 * 4_800_000
    assert split % MIB == 0 and split < DEFAULT_SPLIT_BYTES


def test_files_that_already_split_evenly_keep_the_default():
    # 8 files of 20 MiB cost 24 MiB each, 96 MiB a core: 4 files fit a partition (72 + 20 <= 96), two
    # partitions of 80 MiB, one a core, at every split from 96 MiB up
    files = [20 * MIB] * 8
    assert partition_bytes(files, DEFAULT_SPLIT_BYTES, 2) == [80 * MIB, 80 * MIB]
    assert balanced_split_bytes([files], cores=2) == DEFAULT_SPLIT_BYTES
