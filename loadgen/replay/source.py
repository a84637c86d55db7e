"""Replay sources: read a trace of messages (CSV, JSONL, Parquet or a sojourn run) into a ReplayTrace.

Every value is checked once, at load time; a bad one raises ReplayFileError naming the file,
the line (CSV, JSONL) or row (Parquet), the column and the value. Rows are sorted stably by
time and their times made relative to the earliest row. The columns are described in
docs/replay.md.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from loadgen.errors import LoadgenError
from loadgen.scenario.checks import MAX_SIZE_BYTES, amqp_name
from loadgen.scenario.errors import Invalid

__all__ = ["ReplayFileError", "ReplayTrace", "load_trace", "EXTENSIONS", "TIME_COLUMNS", "COLUMNS"]

EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
TIME_COLUMNS = ("offset_s", "offset_ms", "timestamp")
COLUMNS = TIME_COLUMNS + (
    "size_bytes",
    "routing_key",
    "priority",
    "processing_ms",
    "headers",
    "payload_b64",
    "exchange",
)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DELIVERED = ("ack", "auto_ack")


class ReplayFileError(LoadgenError, ValueError):
    """A replay source that can not be read or holds a bad value.

    `path` is the file (or run directory), `where` the place in it (`"line 12"` for CSV and
    JSONL, `"row 7"` for Parquet, None for the whole file), `column` the column (or None) and
    `value` the offending value (None when there is none). `str(err)` is one line:
    `traces/x.csv: line 12, column 'size_bytes': 'abc' is not a whole number >= 0`.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        message: str,
        *,
        where: str | None = None,
        column: str | None = None,
        value: Any = None,
    ) -> None:
        self.path = str(path)
        self.where = where
        self.column = column
        self.value = value
        self.message = message
        location = ", ".join(part for part in (where, f"column {column!r}" if column else None) if part)
        super().__init__(f"{self.path}: {location}: {message}" if location else f"{self.path}: {message}")


@dataclass(frozen=True)
class ReplayTrace:
    """The rows of a replay source, sorted by time; one tuple per column, all of equal length.

    `offset_s` is relative to the earliest row (which is 0.0). `ignored_columns` lists the
    columns of the source that replay does not know, so the caller can warn once.
    """

    path: str
    format: str
    offset_s: tuple[float, ...]
    size_bytes: tuple[int, ...]
    routing_key: tuple[str | None, ...]
    priority: tuple[int | None, ...]
    processing_ms: tuple[float | None, ...]
    headers: tuple[dict | None, ...]
    payload: tuple[bytes | None, ...]
    ignored_columns: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.offset_s)


def load_trace(path: str | os.PathLike) -> ReplayTrace:
    """Read and check a replay source; the format comes from the extension, or a run directory."""
    p = Path(path)
    if p.is_dir():
        return _load_run(p)
    fmt = EXTENSIONS.get(p.suffix.lower())
    if fmt is None:
        accepted = ", ".join(EXTENSIONS)
        raise ReplayFileError(
            p,
            f"unknown replay file type {p.suffix or '(no extension)'!r}; "
            f"accepted: {accepted}, or a sojourn run directory",
        )
    if not p.is_file():
        raise ReplayFileError(p, "no such file")
    if fmt == "csv":
        return _load_rows(p, fmt, *_read_csv(p))
    if fmt == "jsonl":
        return _load_rows(p, fmt, *_read_jsonl(p))
    return _load_rows(p, fmt, *_read_parquet(p))


# --- reading: each reader yields (columns found, rows as (where, {column: value})) ------------

_Rows = Iterable[tuple[str, Mapping[str, Any]]]


def _read_csv(p: Path) -> tuple[list[str], _Rows]:
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReplayFileError(p, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    # newline="": csv sees the line ends as written, so quoted cells may span lines and
    # reader.line_num counts physical lines.
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        while header == []:
            header = next(reader, None)
    except csv.Error as exc:
        raise ReplayFileError(p, f"bad CSV: {exc}", where=f"line {reader.line_num}") from None
    if header is None:
        raise ReplayFileError(p, "empty file: no header row and no rows")
    names = [name.strip() for name in header]
    header_line = reader.line_num
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReplayFileError(
            p, f"header repeats column(s) {', '.join(map(repr, duplicates))}", where=f"line {header_line}"
        )
    if "" in names:
        raise ReplayFileError(
            p, f"header has an empty column name (column {names.index('') + 1})", where=f"line {header_line}"
        )

    def rows() -> Iterator[tuple[str, Mapping[str, Any]]]:
        end = header_line
        while True:
            start = end + 1
            try:
                cells = next(reader, None)
            except csv.Error as exc:
                raise ReplayFileError(p, f"bad CSV: {exc}", where=f"line {start}") from None
            end = reader.line_num
            if cells is None:
                return
            if not cells:  # a blank line
                continue
            if len(cells) != len(names):
                raise ReplayFileError(p, f"{len(cells)} fields, the header has {len(names)}", where=f"line {start}")
            yield f"line {start}", {n: (c if c.strip() != "" else None) for n, c in zip(names, cells)}

    return names, rows()


def _read_jsonl(p: Path) -> tuple[list[str], _Rows]:
    try:
        # split on "\n" only: str.splitlines() would also split on U+2028, valid inside JSON strings
        lines = p.read_text(encoding="utf-8-sig").split("\n")
    except UnicodeDecodeError as exc:
        raise ReplayFileError(p, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    rows: list[tuple[str, Mapping[str, Any]]] = []
    names: dict[str, None] = {}  # ordered set
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReplayFileError(
                p, f"not valid JSON: {exc.msg} at column {exc.colno}", where=where, value=_clip(line)
            ) from None
        if not isinstance(obj, dict):
            raise ReplayFileError(p, f"{_show(obj)} is not a JSON object", where=where, value=obj)
        names.update(dict.fromkeys(obj))
        rows.append((where, obj))
    return list(names), rows


def _read_parquet(p: Path) -> tuple[list[str], _Rows]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(p)
    except (pa.ArrowException, OSError) as exc:
        raise ReplayFileError(p, f"not a readable Parquet file: {exc}") from None
    names = table.column_names
    columns: dict[str, list] = {}
    for name in names:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            # Native timestamps (stored as UTC) become epoch seconds; as_py() would drop nanoseconds.
            per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[column.type.unit]
            columns[name] = [None if v is None else v / per_second for v in column.cast(pa.int64()).to_pylist()]
        else:
            columns[name] = column.to_pylist()

    def rows() -> Iterator[tuple[str, Mapping[str, Any]]]:
        for i in range(table.num_rows):
            yield f"row {i}", {name: values[i] for name, values in columns.items()}

    return names, rows()


# --- checking the rows of an external file -------------------------------------------------


def _load_rows(p: Path, fmt: str, names: list[str], rows: _Rows) -> ReplayTrace:
    found = ", ".join(names) if names else "none"
    time_columns = [n for n in names if n in TIME_COLUMNS]
    if len(time_columns) != 1:
        problem = "no time column" if not time_columns else f"{len(time_columns)} time columns"
        raise ReplayFileError(p, f"{problem}: give exactly one of {', '.join(TIME_COLUMNS)} (columns found: {found})")
    if "size_bytes" not in names and "payload_b64" not in names:
        raise ReplayFileError(p, f"no size_bytes column (needed unless payload_b64 is given; columns found: {found})")
    time_column = time_columns[0]
    to_seconds = _TIME_PARSERS[time_column]
    parsed: list[tuple] = []
    for where, row in rows:

        def get(column: str, parse: Callable[[Any], Any]) -> Any:  # called for this row only
            value = row.get(column)  # noqa: B023
            if value is None:
                return None
            try:
                return parse(value)
            except _Bad as bad:
                raise ReplayFileError(p, f"{_show(value)} {bad}", where=where, column=column, value=value) from None  # noqa: B023

        t = get(time_column, to_seconds)
        if t is None:
            raise ReplayFileError(p, "missing: every row needs a time", where=where, column=time_column)
        payload = get("payload_b64", _payload)
        size = get("size_bytes", _size_bytes)
        if size is None:
            if payload is None:
                raise ReplayFileError(p, "missing: give size_bytes or payload_b64", where=where, column="size_bytes")
            size = len(payload)
        parsed.append(
            (
                t,
                size,
                get("routing_key", _routing_key),
                get("priority", _priority),
                get("processing_ms", _non_negative_float),
                get("headers", _json_object),
                payload,
            )
        )
    if not parsed:
        raise ReplayFileError(p, "no rows")
    ignored = tuple(n for n in names if n not in COLUMNS)
    return _trace(p, fmt, parsed, ignored)


def _trace(p: Path, fmt: str, parsed: list[tuple], ignored: tuple[str, ...]) -> ReplayTrace:
    """Sort stably by time (the first field) and make the times relative to the earliest."""
    parsed.sort(key=lambda r: r[0])
    t0 = parsed[0][0]
    columns = list(zip(*parsed))
    return ReplayTrace(
        path=str(p),
        format=fmt,
        offset_s=tuple(t - t0 for t in columns[0]),
        size_bytes=columns[1],
        routing_key=columns[2],
        priority=columns[3],
        processing_ms=columns[4],
        headers=columns[5],
        payload=columns[6],
        ignored_columns=ignored,
    )


class _Bad(ValueError):
    """A value parser's complaint, completed with the file, place and column by the caller."""


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise _Bad("is not a number")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _Bad("is not a number") from None
    else:
        raise _Bad("is not a number")
    if not math.isfinite(number):
        raise _Bad("is not a finite number")
    return number


def _seconds(value: Any) -> float:
    return _number(value)


def _milliseconds(value: Any) -> float:
    return _number(value) / 1000.0


def _timestamp(value: Any) -> float:
    """ISO-8601 text (with an offset or Z; naive means UTC) or a number of epoch seconds."""
    if isinstance(value, str):
        text = value.strip()
        try:
            return _number(text)
        except _Bad:
            pass
        try:
            # Python 3.10's fromisoformat does not read a trailing "Z"
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
        except ValueError:
            raise _Bad("is not an ISO-8601 timestamp or a number of epoch seconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return (moment - _EPOCH).total_seconds()
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return (moment - _EPOCH).total_seconds()
    try:
        return _number(value)
    except _Bad:
        raise _Bad("is not an ISO-8601 timestamp or a number of epoch seconds") from None


_TIME_PARSERS: dict[str, Callable[[Any], float]] = {
    "offset_s": _seconds,
    "offset_ms": _milliseconds,
    "timestamp": _timestamp,
}


def _whole_number(value: Any) -> int:
    problem = "is not a whole number >= 0"
    if isinstance(value, bool):
        raise _Bad(problem)
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise _Bad(problem) from None
    else:
        raise _Bad(problem)
    if number < 0:
        raise _Bad(problem)
    return number


def _priority(value: Any) -> int:
    try:
        number = _whole_number(value)
    except _Bad:
        number = -1
    if not 0 <= number <= 255:
        raise _Bad("is not a whole number from 0 to 255")
    return number


def _non_negative_float(value: Any) -> float:
    try:
        number = _number(value)
    except _Bad:
        number = -1.0
    if number < 0:
        raise _Bad("is not a number >= 0")
    return number


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad("is not a string")
    return value


def _size_bytes(value: Any) -> int:
    size = _whole_number(value)
    if size > MAX_SIZE_BYTES:
        raise _Bad(f"is larger than {MAX_SIZE_BYTES:,} bytes (128 MiB), the largest body sojourn sends")
    return size


def _routing_key(value: Any) -> str:
    """As a scenario's routing keys are checked (an AMQP short string)."""
    try:
        return cast(str, amqp_name()(_string(value)))
    except Invalid as bad:
        raise _Bad(f"is not a routing key the broker takes: {bad}") from None


def _json_object(value: Any) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise _Bad(f"is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise _Bad("is not a JSON object")
    return value


def _payload(value: Any) -> bytes:
    if not isinstance(value, str):
        raise _Bad("is not base64 text")
    try:
        return base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise _Bad("is not valid base64") from None


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- a sojourn run directory -----------------------------------------------------------------

_PUBLISH_COLUMNS = ("message_id", "producer", "seq", "intended_ns", "size_bytes", "routing_key", "priority")
_DELIVERY_COLUMNS = ("message_id", "outcome", "processing_ms", "end_ns")


def _load_run(run: Path) -> ReplayTrace:
    """The publishes of a recorded run, at their intended times (the arrival process as generated)."""
    if not (run / "run.json").is_file():
        raise ReplayFileError(run, "not a sojourn run directory: no run.json")
    parts = sorted((run / "traces" / "publish").glob("*.parquet"))
    if not parts:
        raise ReplayFileError(run, "not a sojourn run directory: no traces/publish/*.parquet")
    publish = _read_columns(run, parts, _PUBLISH_COLUMNS, optional=("priority",))
    if not publish["intended_ns"]:
        raise ReplayFileError(run, "no rows in traces/publish")
    processing = _processing_by_message(run)
    order = sorted(
        range(len(publish["intended_ns"])),
        key=lambda i: (publish["intended_ns"][i], publish["producer"][i], publish["seq"][i]),
    )
    first_ns = publish["intended_ns"][order[0]]
    n = len(order)
    return ReplayTrace(
        path=str(run),
        format="run",
        offset_s=tuple((publish["intended_ns"][i] - first_ns) / 1e9 for i in order),
        size_bytes=tuple(publish["size_bytes"][i] for i in order),
        routing_key=tuple(publish["routing_key"][i] for i in order),
        priority=tuple(publish["priority"][i] for i in order),
        processing_ms=tuple(processing.get(publish["message_id"][i]) for i in order),
        headers=(None,) * n,
        payload=(None,) * n,
        ignored_columns=(),
    )


def _processing_by_message(run: Path) -> dict[str, float | None]:
    """message_id -> processing_ms of its first delivery (by end_ns) that was processed (ack, auto_ack)."""
    parts = sorted((run / "traces" / "delivery").glob("*.parquet"))
    if not parts:
        return {}
    rows = _read_columns(run, parts, _DELIVERY_COLUMNS)
    first: dict[str, tuple[float, float | None]] = {}
    for message_id, outcome, processing_ms, end_ns in zip(
        rows["message_id"], rows["outcome"], rows["processing_ms"], rows["end_ns"]
    ):
        if message_id is None or outcome not in _DELIVERED:
            continue
        end = math.inf if end_ns is None else end_ns
        if message_id not in first or end < first[message_id][0]:
            first[message_id] = (end, processing_ms)
    return {message_id: processing_ms for message_id, (_, processing_ms) in first.items()}


def _read_columns(
    run: Path, parts: list[Path], wanted: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, list]:
    """The wanted columns of every part file, concatenated; an absent optional column reads as nulls."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: dict[str, list] = {name: [] for name in wanted}
    for part in parts:
        try:
            present = set(pq.read_schema(part).names)
            missing = [c for c in wanted if c not in present and c not in optional]
            if missing:
                raise ReplayFileError(
                    part, f"missing column(s) {', '.join(missing)} (present: {', '.join(sorted(present))})"
                )
            table = pq.read_table(part, columns=[c for c in wanted if c in present])
        except (pa.ArrowException, OSError) as exc:
            raise ReplayFileError(part, f"not a readable Parquet file: {exc}") from None
        for name in wanted:
            out[name].extend(table.column(name).to_pylist() if name in present else [None] * table.num_rows)
    return out
