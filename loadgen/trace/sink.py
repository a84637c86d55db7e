"""The trace writer's child process: serialised batches in, Parquet part files out.

`python -m loadgen.trace.sink ROOT RUN_ID WORKER IN_FD OUT_FD`, started by TraceWriter
(loadgen.trace.writer), which numbers the batches and waits for each answer. Each batch is
spilled as it came (a file write) and converted to its Parquet part once the input ends,
after the load; during the load only a backlog over SPILL_LIMIT_BYTES is converted, oldest
first (the writer module's docstring says why). It exits at the end of its input, after
the last part, so a parent that dies still gets every batch it had handed over written.

Given a listening socket as a sixth argument, it also serves the run's live metrics on it
(loadgen.metrics): it folds each batch's rows into them after answering the batch, so the
run's I/O loop pays nothing for them; they are as fresh as the writer's last flush (a second).
"""

from __future__ import annotations

import gc
import json
import logging
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from loadgen.trace.writer import (
    FRAME,
    LIVE,
    REPLY,
    SPILL_LIMIT_BYTES,
    _read_exact,
    _write_all,
    convert_spilled,
    decode,
    spill,
    warm_pyarrow,
)

if TYPE_CHECKING:
    from loadgen.metrics.live import LiveMetrics

PROGRESS_BYTES = 32 << 20  # say what the conversion at the end does when there is at least this much


def serve(
    root: Path,
    run_id: str,
    worker: str,
    in_fd: int,
    out_fd: int,
    limit_bytes: int = SPILL_LIMIT_BYTES,
    metrics: LiveMetrics | None = None,
) -> None:
    """`metrics`: fold each batch's rows into the live metrics once the batch is answered (so the
    run's process never waits for it), and take the live state frames the run's process sends."""
    backlog: deque[tuple[Path, int]] = deque()
    held = 0
    while True:
        try:
            header = _read_exact(in_fd, FRAME.size)
        except EOFError:
            break
        seq, fmt, kind_len, size = FRAME.unpack(header)
        kind = _read_exact(in_fd, kind_len).decode()
        payload = _read_exact(in_fd, size)
        if fmt == LIVE:
            _write_all(out_fd, REPLY.pack(0, 0))
            metrics = _fold(metrics, kind, fmt, payload)
            continue
        try:
            backlog.append((spill(root, kind, seq, run_id, worker, fmt, payload), size))
            held += size
            reply = REPLY.pack(0, 0)
        except OSError as exc:  # the parent raises it where the flush was asked for
            message = f"{type(exc).__name__}: {exc}".encode()
            reply = REPLY.pack(1, len(message)) + message
        _write_all(out_fd, reply)
        metrics = _fold(metrics, kind, fmt, payload)
        del payload
        while held > limit_bytes:
            path, size = backlog.popleft()
            held -= size
            _convert(path)
    if held >= PROGRESS_BYTES:
        print(f"sojourn: converting {held / 1e6:.0f} MB of {worker}'s traces to Parquet", file=sys.stderr, flush=True)
    began = time.monotonic()
    for path, _ in backlog:
        _convert(path)
    if held >= PROGRESS_BYTES:
        print(f"sojourn: {worker}'s traces converted in {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)


def _fold(metrics: LiveMetrics | None, kind: str, fmt: int, payload: bytes) -> LiveMetrics | None:
    """Fold a batch of rows (or the run's live state) into the metrics; a failure turns the metrics
    off (said once, with its traceback), never the traces."""
    if metrics is None:
        return None
    try:
        if fmt == LIVE:
            metrics.set_live(json.loads(payload))
        else:
            metrics.observe(kind, decode(fmt, payload))
    except Exception:
        logging.getLogger(__name__).exception("live metrics failed; they stay at their last values")
        return None
    return metrics


def _convert(path: Path) -> None:
    """Convert one spilled batch. Its rows die when `convert_spilled` returns: a collection while
    they were alive walked every one of them."""
    convert_spilled(path)
    gc.collect()  # walks little: the batch's rows are gone


def main(argv: list[str]) -> int:
    # Ctrl-C reaches the whole process group; the parent's last flush still needs this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(stream=sys.stderr, format="sojourn: %(message)s")
    root, run_id, worker, in_fd, out_fd, *metrics_fd = argv
    warm_pyarrow()
    metrics = None
    if metrics_fd:  # the run's process listens; this process serves what it folds from the rows
        from loadgen.metrics import endpoint
        from loadgen.metrics.live import LiveMetrics

        metrics = LiveMetrics(run_id, worker)
        endpoint.serve(int(metrics_fd[0]), metrics.registry)
    # Each batch is thousands of tuples: with the collector on, they set off a collection every
    # 700, which walked pyarrow's and pandas' modules too (7 % of this process's CPU). What exists
    # now is frozen, and the collector runs once a batch, after its rows were freed.
    gc.collect()
    gc.freeze()
    gc.disable()
    serve(Path(root), run_id, worker, int(in_fd), int(out_fd), metrics=metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
