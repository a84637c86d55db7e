"""Batched Parquet trace writer, one per worker process.

Rows are appended as tuples (the kind's columns after the three common ones) and
written as small part files: `traces/<kind>/part-<worker>-<seq>.parquet`. Each part
is written to a hidden temporary name and renamed, so a reader never sees half a
file and a crash loses at most the rows since the last flush (one second by
default). Flushes run in a thread so the gevent loop keeps serving sockets.

A writer that serves an I/O loop (one given an `offload`) converts rows to Arrow and
writes Parquet in a child process (`loadgen.trace.sink`): pyarrow's conversion of
Python objects holds the GIL, and a thread holding the GIL stalls the loop. Its rows
are marshalled as they come, `CHUNK_ROWS` at a time, while they are still in the CPU's
caches, and only the bytes are kept until the flush: keeping a second's row tuples
for one big marshal at the flush cost the loop twice as much per row (memory the
allocator could not reuse, collections set off by the tuples; docs/benchmarks.md).

The child does not convert a batch when it gets it: it keeps the bytes as they came, in a
hidden file beside the parts (`spill`), and converts them once its input ends, after the
load (`convert`); only a backlog over `SPILL_LIMIT_BYTES` is converted during the run,
oldest first. The conversion is most of what tracing costs (2.5-2.8 us a row), and during
the load it competed for the cores with the broker and the loop it measures. A spilled
batch is as safe as a part: if the child dies, the parent converts what it left at close,
and `sojourn run` / `sojourn analyze` convert whatever a killed run left (`recover`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import marshal
import os
import pickle
import re
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis.schema import KINDS, SCHEMA_VERSION, arrow_schema
from loadgen.childenv import child_env

__all__ = ["TraceWriter", "write_part", "recover"]

log = logging.getLogger(__name__)

_COMMON = 3  # schema_version, run_id, worker

# parent -> child: seq, payload format, len(kind), len(payload); kind; payload
FRAME = struct.Struct("!IBBQ")
# child -> parent: status (0 taken, 1 failed), len(message); message
REPLY = struct.Struct("!BI")
# a spilled batch's file: payload format, len(run_id), len(worker); run_id; worker; the payload
RAW = struct.Struct("!BHH")
RAW_SUFFIX = ".raw"
ALIVE_FD_ENV = "SOJOURN_ALIVE_FD"  # a pipe end the child holds too (_alive_fd)
SPILL_LIMIT_BYTES = 256 << 20  # the child converts its oldest spilled batches beyond this (~2M rows)
MARSHAL, PICKLE = 0, 1  # how each chunk of rows is serialised
CHUNKS = 3  # the payload's format: chunks, each CHUNK (MARSHAL or PICKLE, length) then its bytes
LIVE = 4  # the payload's format: the run process's live state for the metrics (JSON), not rows
CHUNK = struct.Struct("!BI")
CHUNK_ROWS = 256  # rows serialised per call, as they are appended (~0.1 ms of the caller's loop)


def part_name(worker: str, seq: int) -> str:
    return f"part-{worker}-{seq:06d}.parquet"


def write_part(root: Path, kind: str, name: str, run_id: str, worker: str, rows: list[tuple]) -> int:
    """Write `rows` of `kind` as the part file `root/kind/name`, atomically (temporary name, rename).

    The rows become one struct array in a single C++ call (no transpose into per-column Python
    lists, then a call per column: 0.6 against 1.2 us a publish row, docs/benchmarks.md), and only
    the string columns that repeat (names, phases, outcomes; not the message id) are
    dictionary-encoded: timestamps, sequence numbers and ids never repeat, and trying a dictionary
    on them cost time and made the file bigger."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(kind)
    n = len(rows)
    own = list(schema)[_COMMON:]
    # Nullable children, as per-column arrays had: the schema's nullability is the analysis's contract.
    columns = pa.array(rows, type=pa.struct([pa.field(f.name, f.type) for f in own])).flatten()
    arrays = [
        pa.repeat(pa.scalar(SCHEMA_VERSION, pa.int32()), n),
        pa.repeat(pa.scalar(run_id, pa.string()), n),
        pa.repeat(pa.scalar(worker, pa.string()), n),
        *columns,
    ]
    table = pa.Table.from_arrays(arrays, schema=schema)
    tmp = root / kind / f".{name}.{os.getpid()}.tmp"  # two converters of one spilled batch do not clash
    pq.write_table(table, tmp, use_dictionary=list(_dictionary_columns(kind)))
    os.replace(tmp, root / kind / name)
    return n


@functools.cache
def _dictionary_columns(kind: str) -> tuple[str, ...]:
    import pyarrow as pa

    return tuple(f.name for f in arrow_schema(kind) if pa.types.is_string(f.type) and f.name != "message_id")


def warm_pyarrow() -> None:
    """Pay pyarrow's first-use costs now: `import pyarrow.parquet`, and the first `pa.array()`
    of a Python list, which imports pandas (0.85 s here). Paid by the first flush instead, each
    held the GIL in the flush thread and stalled the I/O loop mid-run."""
    import pyarrow as pa
    import pyarrow.parquet

    pa.array([0], pa.int64())


def serialise(rows: list[tuple]) -> tuple[int, bytes]:
    """One chunk of rows in one C call: marshal, or pickle for a value marshal does not know."""
    try:
        return MARSHAL, marshal.dumps(rows)
    except ValueError:  # slower, but any value
        return PICKLE, pickle.dumps(rows, pickle.HIGHEST_PROTOCOL)


def encode(chunks: list[tuple[int, bytes]]) -> list[bytes]:
    """A payload of CHUNKS format, as the pieces to write one after the other."""
    return [piece for fmt, data in chunks for piece in (CHUNK.pack(fmt, len(data)), data)]


def decode(fmt: int, payload: bytes | memoryview) -> list[tuple]:
    """The rows of a payload `encode` built."""
    if fmt != CHUNKS:
        raise ValueError(f"unknown payload format {fmt}")
    chunks, view, at = [], memoryview(payload), 0
    while at < len(view):
        chunk_fmt, size = CHUNK.unpack_from(view, at)
        chunks.append((chunk_fmt, view[at + CHUNK.size : at + CHUNK.size + size]))
        at += CHUNK.size + size
    return rows_of(chunks)


def rows_of(chunks) -> list[tuple]:
    """The rows of (format, bytes) chunks, in order."""
    rows: list[tuple] = []
    for fmt, data in chunks:
        rows.extend(marshal.loads(data) if fmt == MARSHAL else pickle.loads(data))
    return rows


def spill_name(worker: str, seq: int) -> str:
    return f".{part_name(worker, seq)}{RAW_SUFFIX}"


def spill(root: Path, kind: str, seq: int, run_id: str, worker: str, fmt: int, payload) -> Path:
    """Keep a batch as its bytes came, in a hidden file (a reader of the parts does not see it)
    that `convert` turns into the part it would have been; written under a temporary name and
    renamed, as a part is."""
    name = spill_name(worker, seq)
    path, tmp = root / kind / name, root / kind / f"{name}.tmp"
    r, w = run_id.encode(), worker.encode()
    with open(tmp, "wb") as f:
        f.write(RAW.pack(fmt, len(r), len(w)) + r + w)
        f.write(payload)
    os.replace(tmp, path)
    return path


def convert(path: Path) -> int:
    """Write the spilled batch at `path` as its part and remove it; its rows (0 if another
    process converted it first: both would write the same part)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    fmt, run_len, worker_len = RAW.unpack_from(data)
    at = RAW.size
    run_id = data[at : at + run_len].decode()
    worker = data[at + run_len : at + run_len + worker_len].decode()
    rows = decode(fmt, memoryview(data)[at + run_len + worker_len :])
    n = write_part(path.parent.parent, path.parent.name, path.name[1 : -len(RAW_SUFFIX)], run_id, worker, rows)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    return n


def convert_spilled(path: Path) -> int:
    """`convert`; a batch that does not convert is set aside (renamed `*.failed`) and named in an
    error, so the others are still written and no one tries it again; its rows."""
    try:
        return convert(path)
    except Exception as exc:  # noqa: BLE001 - one bad batch must not cost the others
        try:
            os.replace(path, path.with_name(path.name + ".failed"))
        except OSError:
            pass
        log.error(
            "trace writer: can not convert %s (set aside as %s.failed): %s: %s",
            path,
            path.name,
            type(exc).__name__,
            exc,
        )
        return 0


def spilled(root: Path, worker: str | None = None) -> list[Path]:
    """The spilled batches under `root` (a traces directory) not converted yet, of one worker or all."""
    who = ".+" if worker is None else re.escape(worker)
    name = re.compile(rf"\.part-{who}-\d{{6,}}\.parquet{re.escape(RAW_SUFFIX)}")
    return sorted(
        p for kind in KINDS if (root / kind).is_dir() for p in (root / kind).iterdir() if name.fullmatch(p.name)
    )


def recover(root: Path, worker: str | None = None) -> int:
    """Convert the batches a writer process left spilled (it was killed, or timed out); the rows."""
    return sum(convert_spilled(path) for path in spilled(root, worker))


def _os_lock():
    """A lock of the operating system's, also under gevent's monkey patching: the child's pipe is
    used from thread-pool threads, where a gevent lock would look for a hub."""
    try:
        from gevent.monkey import get_original
    except ImportError:  # pragma: no cover - gevent comes with Locust
        return threading.Lock()
    return get_original("_thread", "allocate_lock")()


def _os_close():
    """The operating system's close(2), also under gevent's monkey patching: gevent (25.8.1 and
    later) defers `os.close` of a pipe to the event loop's next turn, and a loop with nothing else
    to do never turns while the caller waits for the child to exit, so the child never saw the end
    of its input and every close waited out its 30 s timeout. Nothing watches these pipes in the
    loop (they are read and written by threads), which is the case gevent's deferral guards."""
    try:
        from gevent.monkey import get_original
    except ImportError:  # pragma: no cover - gevent comes with Locust
        return os.close
    return get_original("os", "close")


def _alive_fd() -> tuple[int, ...]:
    """The pipe end `sojourn run` watches to know when every process writing the run's traces has
    exited (loadgen.commands.common.run_locust): the child holds it too."""
    try:
        fd = int(os.environ.get(ALIVE_FD_ENV, ""))
        os.fstat(fd)
    except (ValueError, OSError):
        return ()
    return (fd,)


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("trace writer process closed its pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Child:
    """The writer process and its two pipes; `write` is called with the writer's lock held."""

    def __init__(self, root: Path, run_id: str, worker: str, metrics_fd: int | None = None):
        """`metrics_fd`: a listening socket the child serves the run's live metrics on (loadgen.metrics)."""
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        env = child_env()
        self.sent_bytes = 0
        self.serves_metrics = metrics_fd is not None
        argv = [sys.executable, "-m", "loadgen.trace.sink", str(root), run_id, worker, str(to_child), str(from_child)]
        fds = [to_child, from_child, *_alive_fd()]
        if metrics_fd is not None:
            argv.append(str(metrics_fd))
            fds.append(metrics_fd)
        try:
            self.proc = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL, env=env)
        finally:
            _os_close()(to_child)
            _os_close()(from_child)

    def write(self, kind: str, seq: int, chunks: list[tuple[int, bytes]]) -> None:
        self._send(kind, seq, CHUNKS, encode(chunks))

    def send_live(self, payload: bytes) -> None:
        self._send("live", 0, LIVE, [payload])

    def _send(self, kind: str, seq: int, fmt: int, pieces: list[bytes]) -> None:
        k = kind.encode()
        size = sum(map(len, pieces))
        _write_all(self._to_child, FRAME.pack(seq, fmt, len(k), size) + k)
        for piece in pieces:
            _write_all(self._to_child, piece)
        self.sent_bytes += size
        status, size = REPLY.unpack(_read_exact(self._from_child, REPLY.size))
        message = _read_exact(self._from_child, size).decode() if size else ""
        if status:
            raise RuntimeError(f"trace writer process: {kind} part {seq}: {message}")

    def close(self, timeout_s: float | None = None) -> None:
        """End its input and wait for it to convert what it spilled and exit (by default as long
        as converting every byte sent at 2 MB/s would take, and 30 s more); kill it after that."""
        if timeout_s is None:
            timeout_s = 30.0 + self.sent_bytes / 2e6
        close = _os_close()
        for fd in (self._to_child, self._from_child):
            try:
                close(fd)
            except OSError:
                pass
        try:
            self.proc.wait(timeout_s)  # it exits on end of input, every part written
        except subprocess.TimeoutExpired:
            log.warning(
                "trace writer process still converting after %.0f s; stopping it and converting the rest here",
                timeout_s,
            )
            self.proc.kill()
            self.proc.wait()


_HANDED_WAIT_S = 60.0
"""How long TraceWriter.close waits for a write a thread is still running."""


class _Handed:
    """A write run once: by the thread it was handed to, or by TraceWriter.close if that thread has
    not started it (finish)."""

    def __init__(self, write: Callable[[], None]):
        self._write = write
        self._claim = _os_lock()  # held by whoever runs the write
        self.ended = False

    def __call__(self) -> None:
        if self._claim.acquire(blocking=False):
            self._run()

    def finish(self, timeout_s: float = _HANDED_WAIT_S) -> None:
        """Run the write here if no thread has started it; else wait up to `timeout_s` for it to end."""
        if self._claim.acquire(blocking=False):
            with contextlib.suppress(Exception):  # logged by _run: the rows after it are still written
                self._run()
            return
        deadline = time.monotonic() + timeout_s
        while not self.ended and time.monotonic() < deadline:
            time.sleep(0.01)  # gevent's, once patched: the thread pool's hub callbacks keep running
        if not self.ended:
            log.warning("trace writer: a write handed to a thread did not end within %.0f s", timeout_s)

    def _run(self) -> None:
        try:
            self._write()
        except Exception:
            log.exception("trace writer: a write handed to a thread failed")
            raise
        finally:
            self.ended = True


class TraceWriter:
    def __init__(
        self,
        run_dir: str | os.PathLike,
        run_id: str,
        worker: str,
        *,
        max_rows: int = 50_000,
        offload: Callable[[Callable[[], Any]], Any] | None = None,
        out_of_process: bool | None = None,
        metrics_fd: int | None = None,
    ):
        """`offload(fn)` runs a full batch's write without blocking the caller (e.g. a
        thread pool's spawn); appends may come from the I/O loop itself, which must
        never wait for a file write. Without it, full batches are written inline.

        `out_of_process` (default: when an `offload` is given) converts and writes in a child
        process; if it can not start or dies, the writer goes on in this process.
        `rows_written` counts the rows each kind has had written, or spilled by the child.
        `metrics_fd`: a listening socket on which the child serves live metrics of the rows it
        receives (loadgen.metrics; `send_live` adds the run's own state)."""
        self.root = Path(run_dir) / "traces"
        self.run_id = run_id
        self.worker = worker
        self.max_rows = max_rows
        self._offload = offload
        self._rows: dict[str, list[tuple]] = {kind: [] for kind in KINDS}  # not serialised yet
        self._chunks: dict[str, list[tuple[int, bytes]]] = {kind: [] for kind in KINDS}  # serialised
        self._chunked: dict[str, int] = dict.fromkeys(KINDS, 0)  # rows in _chunks
        self._seq = 0
        self._lock = _os_lock()  # serialises part numbering, file writes and the child's pipe
        self._closed = False
        self._in_flight: list[_Handed] = []  # writes handed to other threads (_handed)
        self.rows_written: dict[str, int] = dict.fromkeys(KINDS, 0)
        for kind in KINDS:
            (self.root / kind).mkdir(parents=True, exist_ok=True)
        self._child: _Child | None = None
        if offload is not None if out_of_process is None else out_of_process:
            try:
                self._child = _Child(self.root, run_id, worker, metrics_fd)
            except OSError as exc:
                log.warning("trace writer process did not start (%s); writing traces in this process", exc)
        if metrics_fd is not None and self._child is None:
            log.warning("live metrics are off: they are served by the trace writer's process, which is not running")
        if self._child is None:
            warm_pyarrow()
        # Rows kept as tuples until there are this many (the whole batch when this process writes)
        self._chunk_rows = min(CHUNK_ROWS, max_rows) if self._child is not None else max_rows
        atexit.register(self.close)

    def append(self, kind: str, row: tuple) -> None:
        rows = self._rows[kind]
        rows.append(row)
        if len(rows) >= self._chunk_rows:
            self._seal(kind)

    def _seal(self, kind: str) -> None:
        """Serialise `kind`'s tuples for the child (while a child takes them); flush a full batch."""
        if self._child is not None:
            rows, self._rows[kind] = self._rows[kind], []
            self._chunks[kind].append(serialise(rows))
            self._chunked[kind] += len(rows)
        if self._chunked[kind] + len(self._rows[kind]) >= self.max_rows:
            self.flush_kind(kind, self._offload)

    def pending(self) -> int:
        return sum(len(r) for r in self._rows.values()) + sum(self._chunked.values())

    def flush_kind(self, kind: str, run_in: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        """Write `kind`'s buffered rows (`run_in`: elsewhere, e.g. a thread pool)."""
        rows, self._rows[kind] = self._rows[kind], []
        n = self._chunked[kind] + len(rows)
        chunks, self._chunks[kind], self._chunked[kind] = self._chunks[kind], [], 0
        if not n:
            return
        if self._child is not None or chunks:
            if rows:
                chunks.append(serialise(rows))
            write = lambda: self._write_in_child(kind, chunks, n)  # noqa: E731
        else:
            write = lambda: self._write(kind, rows)  # noqa: E731
        if run_in is None:
            write()
        else:
            run_in(self._handed(write))

    @property
    def serves_metrics(self) -> bool:
        """Whether a child serves live metrics (it started with a metrics socket and still runs)."""
        child = self._child
        return child is not None and child.serves_metrics

    def send_live(self, state: dict[str, Any]) -> None:
        """Hand the run's live state (loadgen.metrics.live.LiveMetrics.set_live) to the metrics."""
        payload = json.dumps(state).encode()
        with self._lock:
            child = self._child
            if child is None or not child.serves_metrics:
                return
            try:
                child.send_live(payload)
            except (OSError, EOFError) as exc:
                self._lose_child(exc)

    def _lose_child(self, exc: BaseException) -> None:
        """The child's pipe broke (it died): this process writes the traces from now on."""
        metrics = ", live metrics off" if self.serves_metrics else ""
        log.warning("trace writer process failed (%s); writing traces in this process%s", exc, metrics)
        self._child = None
        self._chunk_rows = self.max_rows

    def _handed(self, write: Callable[[], None]) -> Callable[[], None]:
        """`write`, to run in another thread, kept until it has run: close() runs it itself if it has
        not started, and waits for it if it has. A rows' write handed to a thread that never ran it
        (its greenlet killed at the run's end while it waited) lost the rows; one still running at
        the process's exit lost them too."""
        job = _Handed(write)
        self._in_flight = [j for j in self._in_flight if not j.ended] + [job]
        return job

    def flush(self, run_in: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        """Write every buffered row. `run_in` runs the write elsewhere (e.g. a thread pool)."""
        for kind in KINDS:
            self.flush_kind(kind, run_in)

    def close(self) -> None:
        """Write everything and stop the child. Rows appended after that are not dropped: the next
        call (at the latest the one registered with atexit) writes them here, and says so."""
        if self._closed:
            late = self.pending()
            if late:
                log.warning("trace writer: %d rows arrived after it was closed; writing them now", late)
                self.flush()
            return
        for job in self._in_flight:  # handed to threads before this: written ahead of the rows below
            job.finish()
        self._in_flight = []
        self.flush()
        self._closed = True
        with self._lock:
            if self._child is not None:
                self._child.close()
                self._child = None
                self._chunk_rows = self.max_rows
            left = recover(self.root, self.worker)  # what a child that died or was stopped had spilled
        if left:
            log.warning("trace writer: converted %d rows the writer process had left spilled", left)

    def _write_in_child(self, kind: str, chunks: list[tuple[int, bytes]], n: int) -> None:
        with self._lock:
            child = self._child
            if child is not None:
                self._seq += 1
                try:
                    child.write(kind, self._seq, chunks)
                    self.rows_written[kind] += n
                    return
                except (OSError, EOFError) as exc:
                    self._lose_child(exc)
        # the child is gone: this batch and the next ones are written here
        self._write(kind, rows_of(chunks))

    def _write(self, kind: str, rows: list[tuple]) -> None:
        with self._lock:
            self._seq += 1
            self.rows_written[kind] += write_part(
                self.root, kind, part_name(self.worker, self._seq), self.run_id, self.worker, rows
            )
