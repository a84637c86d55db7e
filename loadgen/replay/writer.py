"""Write replay files (.csv, .jsonl, .parquet), row by row, so a long recording streams to disk.

One row per message: `offset_s` (seconds since the recording started, 6 decimals),
`size_bytes`, `routing_key`, `exchange` ("" is the default exchange), `priority` (int or
absent), `headers` (the message's AMQP headers as JSON object text, or absent) and,
when asked for, `payload_b64` and `processing_ms`. Absent is an empty CSV cell, an
omitted JSONL key, a Parquet null. `loadgen.replay.source.load_trace` reads them back.
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loadgen.errors import LoadgenError

__all__ = [
    "REQUIRED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "FORMATS",
    "TraceFileError",
    "TraceFileWriter",
    "trace_format",
    "headers_json",
    "write_trace",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("offset_s", "size_bytes", "routing_key", "exchange", "priority", "headers")
OPTIONAL_COLUMNS: tuple[str, ...] = ("payload_b64", "processing_ms")
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}

_INT_COLUMNS = {"size_bytes", "priority"}
_FLOAT_COLUMNS = {"offset_s", "processing_ms"}


class TraceFileError(LoadgenError, ValueError):
    """A replay file can not be written: bad extension, bad row, unwritable path. `path` names it."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


def trace_format(path: str | os.PathLike) -> str:
    """'csv', 'jsonl' or 'parquet' from the file's extension; TraceFileError for any other."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in FORMATS:
        raise TraceFileError(
            os.fspath(path), f"unknown replay file extension {ext or '(none)'!r}; use one of {', '.join(FORMATS)}"
        )
    return FORMATS[ext]


def headers_json(headers: Mapping[str, Any] | None) -> str | None:
    """AMQP headers as compact JSON object text (None when there are none).

    AMQP tables carry types JSON lacks: byte strings become text (UTF-8, undecodable
    bytes escaped), timestamps ISO 8601 text, decimals floats.
    """
    if not headers:
        return None
    return json.dumps(dict(headers), separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="backslashreplace")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"header value {value!r} of type {type(value).__name__} has no JSON form")


class TraceFileWriter:
    """Append rows to a replay file; `close()` (or leaving the `with` block) finishes it.

    CSV and JSONL rows go through a buffered file (`flush()` pushes them to the OS);
    Parquet rows are written as a row group every `row_group_rows` rows and on close,
    because a Parquet file is readable only once its footer is written.
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str] | None = None, *, row_group_rows: int = 10_000):
        self.path = os.fspath(path)
        self.format = trace_format(self.path)
        cols = tuple(columns) if columns is not None else REQUIRED_COLUMNS
        unknown = [c for c in cols if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
        missing = [c for c in REQUIRED_COLUMNS if c not in cols]
        if unknown or missing:
            raise TraceFileError(
                self.path,
                f"columns: unknown {unknown}, missing {missing}; allowed {list(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)}",
            )
        self.columns = cols
        self.rows_written = 0
        self._row_group_rows = max(1, row_group_rows)
        self._pending: list[dict] = []
        self._closed = False
        self._file: io.TextIOBase | None = None
        self._parquet = None
        try:
            if self.format == "parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq

                self._schema = pa.schema([(c, _arrow_type(pa, c)) for c in cols])
                self._parquet = pq.ParquetWriter(self.path, self._schema)
            else:
                # kept open across append() calls; close() closes it
                self._file = open(self.path, "w", encoding="utf-8", newline="")  # noqa: SIM115
                if self.format == "csv":
                    self._csv = csv.writer(self._file, lineterminator="\n")
                    self._csv.writerow(cols)
        except OSError as exc:
            raise TraceFileError(self.path, f"can not write: {exc.strerror or exc}") from None

    def __enter__(self) -> TraceFileWriter:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def append(self, row: Mapping[str, Any]) -> None:
        if self._closed:
            raise TraceFileError(self.path, "append after close")
        values = self._normalise(row)
        if self.format == "csv":
            self._csv.writerow(["" if values[c] is None else _csv_text(c, values[c]) for c in self.columns])
        elif self.format == "jsonl":
            obj = {c: round(v, 6) if c == "offset_s" else v for c, v in values.items() if v is not None}
            assert self._file is not None  # __init__ opened it for every format but parquet
            self._file.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
        else:
            self._pending.append(values)
            if len(self._pending) >= self._row_group_rows:
                self._write_row_group()
        self.rows_written += 1

    def flush(self) -> None:
        """Push buffered CSV/JSONL rows to the OS (Parquet rows wait for a full row group)."""
        if self._file is not None and not self._closed:
            self._file.flush()

    def close(self) -> None:
        """Write what is left and finish the file; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._parquet is not None:
            try:
                self._write_row_group()
            finally:
                self._parquet.close()
        if self._file is not None:
            self._file.close()

    def _write_row_group(self) -> None:
        if not self._pending:
            return
        import pyarrow as pa

        rows, self._pending = self._pending, []
        table = pa.Table.from_pylist(
            [{c: round(v, 6) if c == "offset_s" and v is not None else v for c, v in r.items()} for r in rows],
            schema=self._schema,
        )
        assert self._parquet is not None  # only called for a parquet file, whose writer __init__ made
        self._parquet.write_table(table)

    def _normalise(self, row: Mapping[str, Any]) -> dict[str, Any]:
        extra = [k for k in row if k not in self.columns]
        if extra:
            raise TraceFileError(
                self.path, f"row {self.rows_written}: unexpected column(s) {extra}; this file has {list(self.columns)}"
            )
        out: dict[str, Any] = {}
        for c in self.columns:
            v = row.get(c)
            if v == "" and c not in ("routing_key", "exchange"):
                v = None
            if c == "headers" and isinstance(v, Mapping):
                v = headers_json(v)
            elif c == "payload_b64" and isinstance(v, (bytes, bytearray)):
                v = base64.b64encode(v).decode("ascii")
            try:
                if v is not None and c in _INT_COLUMNS:
                    v = int(v)
                elif v is not None and c in _FLOAT_COLUMNS:
                    v = float(v)
            except (TypeError, ValueError):
                raise TraceFileError(self.path, f"row {self.rows_written}: {c}={v!r} is not a number") from None
            out[c] = v
        for c in ("offset_s", "size_bytes"):
            if out[c] is None:
                raise TraceFileError(self.path, f"row {self.rows_written}: {c} is required")
        out["routing_key"] = out["routing_key"] or ""
        out["exchange"] = out["exchange"] or ""
        return out


def _csv_text(column: str, value: Any) -> str:
    if column == "offset_s":
        return f"{value:.6f}"
    return str(value)


def _arrow_type(pa, column: str):
    if column in _INT_COLUMNS:
        return pa.int64()
    if column in _FLOAT_COLUMNS:
        return pa.float64()
    return pa.string()


def write_trace(
    path: str | os.PathLike, rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None
) -> int:
    """Write `rows` to a new replay file at `path` and return how many were written.

    Without `columns`, the file holds the required columns plus each optional column
    that any row carries (the rows are read into memory once to find out).
    """
    if columns is None:
        rows = list(rows)
        present = {k for r in rows for k, v in r.items() if v not in (None, "")}
        columns = REQUIRED_COLUMNS + tuple(c for c in OPTIONAL_COLUMNS if c in present)
    with TraceFileWriter(path, columns) as writer:
        for row in rows:
            writer.append(row)
        return writer.rows_written
