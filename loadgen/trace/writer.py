"""Batched Parquet trace writer, one per worker process.

Rows are appended as tuples (the kind's columns after the three common ones) and
written as small part files: `traces/<kind>/part-<worker>-<seq>.parquet`. Each part
is written to a hidden temporary name and renamed, so a reader never sees half a
file and a crash loses at most the rows since the last flush (one second by
default). Flushes run in a thread so the gevent loop keeps serving sockets.
"""
from __future__ import annotations

import atexit
import importlib
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable

from analysis.schema import KINDS, SCHEMA_VERSION, arrow_schema

__all__ = ["TraceWriter"]

log = logging.getLogger(__name__)

_COMMON = 3  # schema_version, run_id, worker


class TraceWriter:
    def __init__(self, run_dir: str | os.PathLike, run_id: str, worker: str, *,
                 max_rows: int = 50_000, offload: Callable[[Callable[[], Any]], Any] | None = None):
        """`offload(fn)` runs a full batch's write without blocking the caller (e.g. a
        thread pool's spawn); appends may come from the I/O loop itself, which must
        never wait for a file write. Without it, full batches are written inline."""
        self.root = Path(run_dir) / "traces"
        self.run_id = run_id
        self.worker = worker
        self.max_rows = max_rows
        self._offload = offload
        self._rows: dict[str, list[tuple]] = {kind: [] for kind in KINDS}
        self._seq = 0
        self._lock = threading.Lock()  # serialises part numbering and file writes
        self._closed = False
        self.rows_written: dict[str, int] = {kind: 0 for kind in KINDS}
        for kind in KINDS:
            (self.root / kind).mkdir(parents=True, exist_ok=True)
        # Import pyarrow now, before any load: imported by the first flush instead, it held
        # the GIL for about 0.7 s in the flush thread and stalled the I/O loop mid-run
        # (docs/benchmarks.md).
        importlib.import_module("pyarrow.parquet")
        atexit.register(self.close)

    def append(self, kind: str, row: tuple) -> None:
        rows = self._rows[kind]
        rows.append(row)
        if len(rows) >= self.max_rows:
            self.flush_kind(kind, self._offload)

    def pending(self) -> int:
        return sum(len(r) for r in self._rows.values())

    def flush_kind(self, kind: str, run_in: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        rows, self._rows[kind] = self._rows[kind], []
        if not rows:
            return
        if run_in is None:
            self._write(kind, rows)
        else:
            run_in(lambda: self._write(kind, rows))

    def flush(self, run_in: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        """Write every buffered row. `run_in` runs the write elsewhere (e.g. a thread pool)."""
        for kind in KINDS:
            self.flush_kind(kind, run_in)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True

    def _write(self, kind: str, rows: list[tuple]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schema(kind)
        n = len(rows)
        columns = list(zip(*rows))
        arrays = [
            pa.array([SCHEMA_VERSION] * n, pa.int32()),
            pa.array([self.run_id] * n, pa.string()),
            pa.array([self.worker] * n, pa.string()),
        ]
        for field, values in zip(list(schema)[_COMMON:], columns):
            arrays.append(pa.array(values, type=field.type))
        table = pa.Table.from_arrays(arrays, schema=schema)
        with self._lock:
            self._seq += 1
            name = f"part-{self.worker}-{self._seq:06d}.parquet"
            tmp = self.root / kind / f".{name}.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, self.root / kind / name)
            self.rows_written[kind] += n
