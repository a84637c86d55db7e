"""The trace writer's child process: serialised batches in, Parquet part files out.

`python -m loadgen.trace.sink ROOT RUN_ID WORKER IN_FD OUT_FD`, started by TraceWriter
(loadgen.trace.writer), which numbers the batches and waits for each answer. Each batch is
spilled as it came (a file write) and converted to its Parquet part once the input ends,
after the load; during the load only a backlog over SPILL_LIMIT_BYTES is converted, oldest
first (the writer module's docstring says why). It exits at the end of its input, after
the last part, so a parent that dies still gets every batch it had handed over written.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import time
from collections import deque
from pathlib import Path

from loadgen.trace.writer import (
    FRAME,
    REPLY,
    SPILL_LIMIT_BYTES,
    _read_exact,
    _write_all,
    convert_spilled,
    spill,
    warm_pyarrow,
)

PROGRESS_BYTES = 32 << 20  # say what the conversion at the end does when there is at least this much


def serve(root: Path, run_id: str, worker: str, in_fd: int, out_fd: int, limit_bytes: int = SPILL_LIMIT_BYTES) -> None:
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
        try:
            backlog.append((spill(root, kind, seq, run_id, worker, fmt, payload), size))
            held += size
            reply = REPLY.pack(0, 0)
        except OSError as exc:  # the parent raises it where the flush was asked for
            message = f"{type(exc).__name__}: {exc}".encode()
            reply = REPLY.pack(1, len(message)) + message
        del payload
        _write_all(out_fd, reply)
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


def _convert(path: Path) -> None:
    """Convert one spilled batch. Its rows die when `convert_spilled` returns: a collection while
    they were alive walked every one of them."""
    convert_spilled(path)
    gc.collect()  # walks little: the batch's rows are gone


def main(argv: list[str]) -> int:
    # Ctrl-C reaches the whole process group; the parent's last flush still needs this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(stream=sys.stderr, format="sojourn: %(message)s")
    root, run_id, worker, in_fd, out_fd = argv
    warm_pyarrow()
    # Each batch is thousands of tuples: with the collector on, they set off a collection every
    # 700, which walked pyarrow's and pandas' modules too (7 % of this process's CPU). What exists
    # now is frozen, and the collector runs once a batch, after its rows were freed.
    gc.collect()
    gc.freeze()
    gc.disable()
    serve(Path(root), run_id, worker, int(in_fd), int(out_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
