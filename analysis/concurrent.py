"""Independent blocks of an analysis, run side by side: while one block's query is planned on the
driver or waits for its last task, another's tasks use the cores (docs/analysis.md, "The plan")."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from analysis.progress import Progress, stage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Block", "in_background", "side_by_side"]


Block = tuple[str, Callable[[], Any]]
"""A stage's name (progress.stage) and what it computes."""


def side_by_side(
    say: Progress, spark: SparkSession | None, blocks: Mapping[str, Block], at_once: int
) -> dict[str, Any]:
    """Each block's result by its key, the blocks run `at_once` at a time in the order given (put
    the longest first), each a stage of its own (its name and time), each in a copy of the caller's
    context (a setting a context variable holds reaches the block). Spark takes queries from several
    threads; each has its own jobs. A failing block raises once every other has ended."""
    if at_once <= 1:
        return {key: _staged(say, spark, block) for key, block in blocks.items()}
    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="sojourn-block") as pool:
        futures = _submitted(pool, say, spark, blocks)
        return {key: future.result() for key, future in futures.items()}


@contextlib.contextmanager
def in_background(
    say: Progress, spark: SparkSession | None, blocks: Mapping[str, Block]
) -> Iterator[Callable[[], dict[str, Any]]]:
    """Run `blocks` one at a time, in the order given, on a thread of their own while the caller
    goes on; yields the call that waits for them and gives each result by its key (a failing block
    raises there). Each block is a stage of its own and runs in a copy of the caller's context as it
    was on entry. On leaving, the blocks not yet started are dropped and the running one is waited
    for, so that nothing of them outlives the caller's frames."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sojourn-background")
    futures = _submitted(pool, say, spark, blocks)
    try:
        yield lambda: {key: future.result() for key, future in futures.items()}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _submitted(
    pool: ThreadPoolExecutor, say: Progress, spark: SparkSession | None, blocks: Mapping[str, Block]
) -> dict[str, Future[Any]]:
    """Each block given to `pool` in the order given, as a stage of its own, in a copy of the caller's context."""
    return {
        key: pool.submit(contextvars.copy_context().run, _staged, say, spark, block) for key, block in blocks.items()
    }


def _staged(say: Progress, spark: SparkSession | None, block: Block) -> Any:
    name, compute = block
    with stage(say, name, spark):
        return compute()
