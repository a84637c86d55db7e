"""Reading a run's traces: the part files of each kind, checked from their footers, read once.

`scan` looks at every part file's Parquet footer (no data is read): the columns and their
types against `analysis/schema.py`, the schema version in the metadata, and the
`schema_version` column's statistics, which say without reading a row whether every row
carries a version this analysis reads (schema.READABLE_VERSIONS: an older trace lacks the
columns added since, which read as null). It also totals rows and bytes, which size the Spark session,
and reads from the footers which columns are null in every row and which hold a value. `read`
then reads each kind once, with the explicit schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession, functions as F

from analysis import schema
from analysis.errors import AnalysisError, MissingTracesError, SchemaVersionError, TraceColumnsError
from analysis.transforms._common import local_rows

__all__ = [
    "KindFiles",
    "SMALL_KINDS",
    "scan",
    "read",
    "read_table",
    "total_rows",
    "total_bytes",
    "distinct_values",
]

SMALL_KINDS = ("event", "leftover", "deadletter")
"""The kinds read by pyarrow on this process and handed to Spark as rows of the plan (a local
relation), not as files to scan: a few thousand rows in most runs; the most leftovers seen, a soak's
623,623 ids, are 30 MB of Arrow."""


class KindFiles(NamedTuple):
    """One trace kind's part files, their rows, each file's bytes on disk (`file_bytes`, in the order
    of `files`), the files whose footers could not vouch for the `schema_version` column (no
    statistics): those get one Spark scan, the columns null in every row of every file
    (`null_columns`: by the footers' statistics, or absent from an older trace), and the columns
    the footers' statistics show a value in (`valued_columns`: some row group counts fewer nulls
    than rows; a column in neither set has no statistics to tell)."""

    kind: str
    files: tuple[Path, ...]
    rows: int
    file_bytes: tuple[int, ...]
    unverified: tuple[Path, ...]
    null_columns: frozenset[str] = frozenset()
    valued_columns: frozenset[str] = frozenset()

    @property
    def bytes(self) -> int:
        """The kind's bytes on disk."""
        return sum(self.file_bytes)


def total_rows(kinds: dict[str, KindFiles]) -> int:
    return sum(k.rows for k in kinds.values())


def total_bytes(kinds: dict[str, KindFiles]) -> int:
    return sum(k.bytes for k in kinds.values())


def _part_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    # A batch its trace writer process kept to convert after the load, and did not (it was
    # killed): its rows are not in any part yet. `sojourn analyze` converts such batches first.
    unconverted = sorted(directory.glob(".*.parquet.raw"))
    if unconverted:
        raise AnalysisError(
            f"{unconverted[0]}: a trace batch not converted to Parquet yet (its writer was "
            f"stopped; {len(unconverted)} in {directory.name}/): `sojourn analyze "
            f"{directory.parent.parent}` converts them first",
            path=unconverted[0],
        )
    return sorted(p for p in directory.glob("*.parquet") if p.is_file() and not p.name.startswith((".", "_")))


def _same_type(found, expected) -> bool:
    import pyarrow as pa

    # large_string is the same Parquet column as string; some writers choose it.
    if pa.types.is_large_string(found) and pa.types.is_string(expected):
        return True
    return found.equals(expected)


def _check_footer(path: Path, kind: str):
    """Compare a part file's footer with the schema: columns, types, schema version. Returns
    (rows, whether the schema_version column's statistics vouch for every row, the columns null
    in every row, the columns with a value in some row)."""
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_metadata(path)
        found = metadata.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises several types for a bad footer
        raise AnalysisError(f"{path}: not a readable Parquet file: {exc}", path=path) from exc
    expected = schema.arrow_schema(kind)
    present = list(found.names)
    recorded = (metadata.metadata or {}).get(b"sojourn.schema_version")
    if recorded is not None and recorded.decode() not in {str(v) for v in schema.READABLE_VERSIONS}:
        raise SchemaVersionError(
            f"{path}: {kind} trace has schema_version {recorded.decode()}, but this analysis "
            f"reads version {schema.READABLE_VERSIONS_TEXT}",
            path=path,
            found=recorded.decode(),
            expected=schema.SCHEMA_VERSION,
        )
    version = int(recorded.decode()) if recorded is not None else schema.SCHEMA_VERSION
    newer = {c.name for c in schema.columns(kind) if c.since > version}  # read as null (schema.Column.since)
    missing = [name for name in expected.names if name not in present and name not in newer]
    wrong = [
        f"{f.name} is {found.field(f.name).type}, expected {f.type}"
        for f in expected
        if f.name in present and not _same_type(found.field(f.name).type, f.type)
    ]
    if missing or wrong:
        raise TraceColumnsError(path=path, kind=kind, missing=missing, present=present, wrong_types=wrong)
    vouched = _version_stats_ok(metadata, present.index("schema_version"), path, kind)
    return (
        metadata.num_rows,
        vouched,
        _null_columns(metadata, present, expected.names),
        _valued_columns(metadata, present, expected.names),
    )


def _null_columns(metadata, present: list[str], names: list[str]) -> set[str]:
    """The columns of `names` null in every row of the file: absent from it, or null in every row
    of every row group by its statistics (a group without a null count says nothing)."""
    nulls = set()
    for name in names:
        if name not in present:
            nulls.add(name)
            continue
        column = present.index(name)  # the trace schemas are flat: a field is a leaf column
        groups = (metadata.row_group(i) for i in range(metadata.num_row_groups))
        if all(_null_in_every_row(group, column) for group in groups):
            nulls.add(name)
    return nulls


def _valued_columns(metadata, present: list[str], names: list[str]) -> set[str]:
    """The columns of `names` with a value in some row of the file, by its statistics: a row
    group whose null count is below its rows."""
    valued = set()
    for name in (n for n in names if n in present):
        column = present.index(name)
        groups = (metadata.row_group(i) for i in range(metadata.num_row_groups))
        if any((nulls := _null_count(group, column)) is not None and nulls < group.num_rows for group in groups):
            valued.add(name)
    return valued


def _null_in_every_row(group, column: int) -> bool:
    return _null_count(group, column) == group.num_rows


def _null_count(group, column: int) -> int | None:
    """The row group's null count of the column by its statistics (None: it has none to tell)."""
    stats = group.column(column).statistics
    return stats.null_count if stats is not None and stats.has_null_count else None


def _version_stats_ok(metadata, column: int, path: Path, kind: str) -> bool:
    """True when every row group's statistics say schema_version is this analysis' version in
    every row; raises when they name another version; False when some group has none."""
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or stats.null_count is None:
            return False
        if stats.null_count:
            raise SchemaVersionError(
                f"{path}: {kind} trace has rows with schema_version null, but this "
                f"analysis reads version {schema.READABLE_VERSIONS_TEXT}",
                path=path,
                found=None,
                expected=schema.SCHEMA_VERSION,
            )
        for value in (stats.min, stats.max):
            if value not in schema.READABLE_VERSIONS:
                raise SchemaVersionError(
                    f"{path}: {kind} trace has rows with schema_version {value}, but this analysis "
                    f"reads version {schema.READABLE_VERSIONS_TEXT}",
                    path=path,
                    found=value,
                    expected=schema.SCHEMA_VERSION,
                )
    return True


def scan(run_dir: str | Path) -> dict[str, KindFiles]:
    """Every kind's part files under RUN_DIR/traces, their footers checked (see the module doc).
    Raises MissingTracesError when there is no traces directory (a run that ended before it wrote a
    row has one, empty, and gives empty blocks)."""
    traces = Path(run_dir) / "traces"
    if not traces.is_dir():
        raise MissingTracesError(
            f"{traces}: not found; a run directory holds run.json and the traces/ the run wrote "
            "(were they deleted, or moved with --out elsewhere?)",
            path=traces,
        )
    kinds = {}
    for kind in schema.KINDS:
        files = _part_files(Path(run_dir) / "traces" / kind)
        rows, unverified, nulls, valued = 0, [], None, set()
        for path in files:
            n, vouched, null_here, valued_here = _check_footer(path, kind)
            rows += n
            if not vouched:
                unverified.append(path)
            nulls = null_here if nulls is None else nulls & null_here
            valued |= valued_here
        sizes = tuple(p.stat().st_size for p in files)
        kinds[kind] = KindFiles(
            kind, tuple(files), rows, sizes, tuple(unverified), frozenset(nulls or ()), frozenset(valued)
        )
    return kinds


def distinct_values(found: KindFiles, columns: Sequence[str]) -> dict[str, list[str]]:
    """Each of the string `columns`' distinct non-null values over the kind's files, sorted: read by
    pyarrow from the files' dictionary pages and codes, without decoding a string per row (10M
    deliveries, five columns: 0.34 s, where a Spark distinct of four took 5.4 s). A column absent
    from a file (an older trace) adds nothing."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    values: dict[str, set[str]] = {name: set() for name in columns}
    for path in found.files:
        present = [name for name in columns if name in pq.read_schema(path).names]
        if not present:
            continue
        table = pq.ParquetFile(path, read_dictionary=present).read(columns=present)
        for name in present:
            for chunk in table.column(name).chunks:
                if pa.types.is_dictionary(chunk.type):
                    chunk = chunk.dictionary.take(pc.unique(chunk.indices))  # the values its rows use
                values[name].update(v for v in chunk.to_pylist() if v is not None)
    return {name: sorted(found_values) for name, found_values in values.items()}


def read(
    spark: SparkSession, kinds: dict[str, KindFiles], tables: dict[str, Any] | None = None
) -> dict[str, DataFrame]:
    """The trace frames, one per kind, read with the explicit schema; a kind without files is an
    empty frame. The SMALL_KINDS are local relations of their Arrow tables (`tables`, read_table's,
    else read here). Files whose footers could not vouch for schema_version are scanned for it."""
    from pyspark.sql.pandas.types import from_arrow_schema

    frames = {}
    for kind, found in kinds.items():
        spark_schema = schema.spark_schema(kind)
        if kind in SMALL_KINDS:
            table = (tables or {}).get(kind)
            if table is None:
                table = read_table(found)
            frames[kind] = spark.createDataFrame(table, schema=from_arrow_schema(table.schema))
        elif found.files:
            frames[kind] = spark.read.schema(spark_schema).parquet(*[p.resolve().as_uri() for p in found.files])
        else:
            frames[kind] = local_rows(spark, [], spark_schema)
    unverified = {
        kind: spark.read.schema(schema.spark_schema(kind)).parquet(*[p.resolve().as_uri() for p in found.unverified])
        for kind, found in kinds.items()
        if found.unverified
    }
    _check_schema_version_column(unverified)
    return {kind: frame.select(*schema.spark_schema(kind).names) for kind, frame in frames.items()}


def read_table(found: KindFiles):
    """Every row of a kind as one Arrow table of the schema's columns, in file order, read by pyarrow
    on this process without Spark (scan checked the footers). A column an older trace lacks is
    null, as in Spark's reading with the explicit schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # nullable as Spark reads Parquet: an older trace's missing column is null in every row
    wanted = pa.schema([f.with_nullable(True) for f in schema.arrow_schema(found.kind)])
    tables = []
    for path in found.files:
        parquet = pq.ParquetFile(path)  # its footer read once: for the columns present, then the rows
        table = parquet.read(columns=[n for n in wanted.names if n in parquet.schema_arrow.names])
        tables.append(
            pa.table(
                [
                    table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
                    for f in wanted
                ],
                schema=wanted,
            )
        )
    return pa.concat_tables(tables) if tables else wanted.empty_table()


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _check_schema_version_column(scans: dict[str, DataFrame]) -> None:
    """Every row must carry this analysis' schema_version: one action, scanning one column."""
    bad = None
    for kind, frame in scans.items():
        rows = frame.where(
            F.col("schema_version").isNull() | ~F.col("schema_version").isin(*schema.READABLE_VERSIONS)
        ).select(F.lit(kind).alias("kind"), "schema_version", F.col("_metadata.file_path").alias("file"))
        bad = rows if bad is None else bad.unionByName(rows)
    found = bad.limit(1).collect() if bad is not None else []
    if found:
        row = found[0]
        path = _local_path(row.file)
        raise SchemaVersionError(
            f"{path}: {row.kind} trace has rows with schema_version {row.schema_version}, "
            f"but this analysis reads version {schema.READABLE_VERSIONS_TEXT}",
            path=path,
            found=row.schema_version,
            expected=schema.SCHEMA_VERSION,
        )
