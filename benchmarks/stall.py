"""How long tracing holds the event loop: `python -m benchmarks.stall SPEC_JSON` (one trial).

A probe greenlet sleeps 0.5 ms at a time and records how late each wake-up is, while the loop's
process appends a second's worth of delivery-like rows (`rows`, in runs of `RUN_ROWS` with a loop
turn between runs, as deliveries arrive) to a trace writer and flushes them to its child, as
RunContext's flush loop does. Variants: `as-appended` (the writer as runs use it: rows serialised
`CHUNK_ROWS` at a time as they come), `one-call` (the rows kept as tuples and the whole batch
serialised in one call at the flush, as before) and `none` (the same appends, rows dropped: the
probe's own lateness on this machine). Prints one JSON line: the probe's worst and
99th-percentile lateness in ms over `flushes` flushes, and the median time the flush call took in
the caller.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

from benchmarks.scratch import scratch_dir  # noqa: E402

PROBE_S = 0.0005
RUN_ROWS = 20  # rows appended between two turns of the loop


def _row(i: int) -> tuple:
    """A delivery row's shape (strings, ints, None), distinct per row as in a run."""
    ns = 1_795_000_000_000_000_000 + i * 1000
    return (
        f"run:p/host/0:{i}",
        "c/host/0",
        "c",
        "base",
        i,
        False,
        ns,
        ns + 500,
        ns + 600,
        ns + 700,
        ns + 800,
        "ack",
        100,
        i % 7,
        100,
        0.0,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
    )


def trial(variant: str, rows: int, flushes: int) -> dict:
    from loadgen.run.clock import LOOP_TURN_S
    from loadgen.trace import TraceWriter

    writer = TraceWriter(
        scratch_dir("sojourn-stall-"),
        "stall",
        "w",
        offload=lambda fn: gevent.get_hub().threadpool.spawn(fn),
        max_rows=10 * rows,
    )
    if variant == "one-call":
        writer._chunk_rows = writer.max_rows  # tuples kept until the flush serialises them
    writer.flush()  # the child is up and pyarrow loaded before measuring
    gevent.sleep(1.0)
    late: list[float] = []
    calls: list[float] = []
    stop = [False]

    def probe() -> None:
        while not stop[0]:
            t = time.perf_counter()
            gevent.sleep(PROBE_S)
            late.append(time.perf_counter() - t - PROBE_S)

    batches = [[_row(i) for i in range(rows)] for _ in range(flushes)]  # built before the probe runs
    append = writer.append if variant != "none" else (lambda kind, row: None)
    g = gevent.spawn(probe)
    for batch in batches:
        gevent.sleep(0.1)
        for start in range(0, len(batch), RUN_ROWS):
            for row in batch[start : start + RUN_ROWS]:
                append("delivery", row)
            gevent.sleep(LOOP_TURN_S)
        t = time.perf_counter()
        writer.flush_kind("delivery", writer._offload)
        calls.append(time.perf_counter() - t)
        gevent.sleep(0.3)  # the child writes the part meanwhile
    stop[0] = True
    g.join()
    writer.close()
    late.sort()
    return {
        "variant": variant,
        "rows": rows,
        "flushes": flushes,
        "worst_ms": round(late[-1] * 1e3, 2),
        "p99_ms": round(late[int(len(late) * 0.99)] * 1e3, 2),
        "flush_call_ms": round(statistics.median(calls) * 1e3, 2),
    }


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    print(json.dumps(trial(spec["variant"], spec["rows"], spec["flushes"])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
