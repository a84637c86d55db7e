"""The trace writer's child process: serialised batches in, Parquet part files out.

`python -m loadgen.trace.sink ROOT RUN_ID WORKER IN_FD OUT_FD`, started by TraceWriter
(loadgen.trace.writer), which numbers the parts and waits for each answer. It exits
at the end of its input, after the last part, so a parent that dies still gets every
batch it had handed over written.
"""
from __future__ import annotations

import gc
import marshal
import pickle
import signal
import sys
from pathlib import Path

from loadgen.trace.writer import CHUNKS, FRAME, MARSHAL, REPLY, _read_exact, _write_all, part_name, warm_pyarrow, write_part


def decode(fmt: int, payload: bytes) -> list[tuple]:
    """The rows of a payload the writer built (TraceWriter._serialise)."""
    if fmt != CHUNKS:
        raise ValueError(f"unknown payload format {fmt}")
    rows: list[tuple] = []
    for chunk_fmt, chunk in marshal.loads(payload):
        rows.extend(marshal.loads(chunk) if chunk_fmt == MARSHAL else pickle.loads(chunk))
    return rows


def serve(root: Path, run_id: str, worker: str, in_fd: int, out_fd: int) -> None:
    while True:
        try:
            header = _read_exact(in_fd, FRAME.size)
        except EOFError:
            return
        seq, fmt, kind_len, size = FRAME.unpack(header)
        kind = _read_exact(in_fd, kind_len).decode()
        payload = _read_exact(in_fd, size)
        try:
            rows = decode(fmt, payload)
            n = write_part(root, kind, part_name(worker, seq), run_id, worker, rows)
            reply = REPLY.pack(0, n, 0)
        except Exception as exc:  # noqa: BLE001 - the parent raises it where the flush was asked for
            message = f"{type(exc).__name__}: {exc}".encode()
            reply = REPLY.pack(1, 0, len(message)) + message
        _write_all(out_fd, reply)
        gc.collect()  # the batch's rows are gone by now: this walks little (see main)


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
