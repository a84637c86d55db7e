"""The census at a run's end: every message left in the queue recorded by id, exactly once, and
left in the queue; a second census sees them as redelivered (the first one's channel requeued
them). Driven by benchmarks/census.py, which measures the same at 100,000 messages."""

from __future__ import annotations

from benchmarks import census

URL = census.DEFAULT_URL
N = 3_000


def test_the_census_records_every_leftover_once_and_leaves_it_in_the_queue():
    queue = "sojourn.it.census"
    census.fill(URL, queue, N, prefix="left-")
    try:
        first = census.run_census(URL, queue)
        second = census.run_census(URL, queue)
    finally:
        census.delete(URL, queue)
    expected = sorted(f"left-{i}" for i in range(N))
    assert first.depth == N and sorted(first.ids) == expected and first.depth_after == N
    assert not any(first.redelivered)
    assert sorted(second.ids) == expected and all(second.redelivered) and second.depth_after == N


def test_an_empty_queue_is_counted_at_once():
    queue = "sojourn.it.census-empty"
    census.fill(URL, queue, 0)
    try:
        result = census.run_census(URL, queue)
    finally:
        census.delete(URL, queue)
    assert (result.depth, result.ids, result.depth_after) == (0, [], 0)
