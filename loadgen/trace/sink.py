"""The trace writer's child process: serialised batches in, Parquet part files out.

`python -m loadgen.trace.sink ROOT RUN_ID WORKER IN_FD OUT_FD`, started by TraceWriter
(loadgen.trace.writer), which numbers the parts and waits for each answer. It exits
at the end of its input, after the last part, so a parent that dies still gets every
batch it had handed over written.
"""
from __future__ import annotations

import gc
import signal
import sys
from pathlib import Path

from loadgen.trace.writer import FRAME, REPLY, _read_exact, _write_all, decode, part_name, warm_pyarrow, write_part


def serve(root: Path, run_id: str, worker: str, in_fd: int, out_fd: int) -> None:
    while True:
        try:
            header = _read_exact(in_fd, FRAME.size)
        except EOFError:
            return
        seq, fmt, kind_len, size = FRAME.unpack(header)
        kind = _read_exact(in_fd, kind_len).decode()
        payload = _read_exact(in_fd, size)
        _write_all(out_fd, _write_batch(root, run_id, worker, kind, seq, fmt, payload))
        del payload
        gc.collect()  # the batch's rows are gone by now (_write_batch returned): this walks little


def _write_batch(root: Path, run_id: str, worker: str, kind: str, seq: int, fmt: int, payload: bytes) -> bytes:
    """Write one batch as its part; the reply for the parent. Its rows die when it returns: the
    collection after it found them alive (`rows` was still a local of the loop) and walked every
    one of them, 5 % of this process's CPU (py-spy)."""
    try:
        rows = decode(fmt, payload)
        n = write_part(root, kind, part_name(worker, seq), run_id, worker, rows)
        return REPLY.pack(0, n, 0)
    except Exception as exc:  # noqa: BLE001 - the parent raises it where the flush was asked for
        message = f"{type(exc).__name__}: {exc}".encode()
        return REPLY.pack(1, 0, len(message)) + message


def main(argv: list[str]) -> int:
    # Ctrl-C reaches the whole process group; the parent's last flush still needs this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
