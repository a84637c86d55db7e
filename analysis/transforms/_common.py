"""Shapes and small column helpers shared by the transform modules."""
from __future__ import annotations

from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

Transform = Callable[[DataFrame], DataFrame]
"""A pure DataFrame -> DataFrame step, applied with `df.transform(step)`."""

ACKED_OUTCOMES = ("ack", "auto_ack")
"""Delivery outcomes that mean the message was processed and settled for good."""

NS_PER_MS = 1e6
NS_PER_S = 1_000_000_000


def ms_between(later: str, earlier: str) -> Column:
    """`later - earlier` in milliseconds: integer nanoseconds subtracted first, then scaled."""
    return (F.col(later) - F.col(earlier)) / F.lit(NS_PER_MS)


def is_acked(outcome: str = "outcome") -> Column:
    return F.col(outcome).isin(*ACKED_OUTCOMES)


def seconds_to_ns(seconds: float) -> int:
    """Offsets from run.json (floats in s) to integer ns, rounded to the nearest ns."""
    return int(round(seconds * NS_PER_S))
