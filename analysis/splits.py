"""The scan split size that spreads the traces' files evenly over the local cores.

Spark packs a scan's files into partitions ("next fit decreasing": the largest first, each
partition filled up to `spark.sql.files.maxPartitionBytes`, every file also costing
`spark.sql.files.openCostInBytes`), and runs a stage's tasks a core at a time. Packed at the
default 128 MiB, the 100 delivery files of a 10M-message run (461 MB) make 7 partitions, six
full and one two-thirds: on two cores the last round runs one task, and every pass over the
deliveries takes 1.10 times as long as the same work split evenly. `balanced_split_bytes`
simulates the packing for the big kinds' file sizes and picks the split size whose tasks end
together (108 MiB there: 8 partitions of the deliveries, 6 of the publishes).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["DEFAULT_SPLIT_BYTES", "OPEN_COST_BYTES", "partition_bytes", "rounds_bytes", "balanced_split_bytes"]

_MIB = 1 << 20
DEFAULT_SPLIT_BYTES = 128 * _MIB
"""Spark's default `spark.sql.files.maxPartitionBytes`."""
OPEN_COST_BYTES = 4 * _MIB
"""Spark's default `spark.sql.files.openCostInBytes`."""
_SMALLEST_SPLIT_BYTES = 32 * _MIB


def partition_bytes(
    file_bytes: Sequence[int], max_split: int, cores: int, open_cost: int = OPEN_COST_BYTES
) -> list[int]:
    """The bytes of each partition Spark makes of one scan of these files with
    `spark.sql.files.maxPartitionBytes` at `max_split`: the split size capped at the scan's bytes
    per core (FilePartition.maxSplitBytes), a file larger than it cut into splits of it, the splits
    packed largest first (FilePartition.getFilePartitions). `open_cost`: the setting
    `spark.sql.files.openCostInBytes`."""
    per_core = sum(f + open_cost for f in file_bytes) // max(cores, 1)
    split = min(max_split, max(open_cost, per_core))
    pieces = [min(split, size - offset) for size in file_bytes for offset in range(0, max(size, 1), split)]
    partitions: list[int] = []
    current, filled = 0, 0
    for size in sorted(pieces, reverse=True):
        if filled and filled + size > split:
            partitions.append(current)
            current, filled = 0, 0
        current += size
        filled += size + open_cost
    if filled:
        partitions.append(current)
    return partitions


def rounds_bytes(partitions: Sequence[int], cores: int) -> int:
    """When the last of these tasks ends, in bytes of work, with each task started in order on
    the first free core (the makespan)."""
    free = [0] * max(cores, 1)
    for size in partitions:
        heapq.heappush(free, heapq.heappop(free) + size)
    return max(free)


def balanced_split_bytes(kinds: Sequence[Sequence[int]], cores: int) -> int:
    """The `spark.sql.files.maxPartitionBytes`, from 128 MiB down to 32 in whole MiB, that makes the
    scans of these kinds (each a list of its files' bytes) end soonest in all on `cores` cores,
    with no kind in more partitions than the default makes, rounded up to a whole round of the
    cores: a task more is one more partial aggregate for the groupings above a scan to shuffle
    and merge (the per-second sketches: 14 MB a task at 10M). Of equals, the largest."""
    cores = max(cores, 1)
    kinds = [files for files in kinds if files]
    most = [-(-len(partition_bytes(files, DEFAULT_SPLIT_BYTES, cores)) // cores) * cores for files in kinds]
    best, best_cost = DEFAULT_SPLIT_BYTES, None
    for split in range(DEFAULT_SPLIT_BYTES, _SMALLEST_SPLIT_BYTES - 1, -_MIB):
        partitions = [partition_bytes(files, split, cores) for files in kinds]
        if any(len(p) > limit for p, limit in zip(partitions, most)):
            continue
        cost = sum(rounds_bytes(p, cores) for p in partitions)
        if best_cost is None or cost < best_cost:
            best, best_cost = split, cost
    return best
