"""String columns as int codes, for a cache Spark reads column by column.

Spark's in-memory cache hands its column batches to a query as they are only when every cached
column is of a primitive type (its default serializer: `supportsColumnarOutput`); one string
column, and every query reads the cache row by row. The deliveries' few-valued strings (consumer,
group, phase, outcome, egress class) are cached as each value's index in the column's sorted distinct values
(`analysis.traces.distinct_values` reads them from the Parquet dictionaries), and read back as the
strings by a lookup in a literal array: the queries above the cache see the same columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform

__all__ = ["encoded", "decoded"]

Dictionaries = Mapping[str, Sequence[str]]
"""column -> its distinct non-null values, sorted; a value's code is its index."""


def _values(values: Sequence[str]) -> Column:
    return F.array(*[F.lit(v) for v in values]) if values else F.array().cast("array<string>")


def encoded(dictionaries: Dictionaries) -> Transform:
    """Each column of `dictionaries` replaced by its value's index (an int; null stays null). A value
    missing from its dictionary is an error: the dictionaries are read from the same files."""

    def _encode(frame: DataFrame) -> DataFrame:
        codes = {}
        for name, values in dictionaries.items():
            position = F.array_position(_values(values), F.col(name))  # 1-based; 0: not found
            found = F.when(position > 0, (position - 1).cast("int")).otherwise(
                F.raise_error(F.concat(F.lit(f"{name}: a value not in its dictionary: "), F.col(name)))
            )
            codes[name] = F.when(F.col(name).isNotNull(), found).cast("int")
        return frame.withColumns(codes) if codes else frame  # Spark Connect refuses an empty withColumns

    return _encode


def decoded(dictionaries: Dictionaries) -> Transform:
    """The inverse of `encoded`: each coded column back to its string."""

    def _decode(frame: DataFrame) -> DataFrame:
        columns = {name: F.get(_values(values), F.col(name)) for name, values in dictionaries.items()}
        return frame.withColumns(columns) if columns else frame  # Spark Connect refuses an empty withColumns

    return _decode
