"""The census's speed and memory: N messages left in a queue, counted by id as a run's end does.

    python -m benchmarks.census --messages 100000 [--url amqp://guest:guest@127.0.0.1:5672/]

Fills a queue of its own with N messages carrying `sojourn-id` headers, runs `loadgen.run.census`
against it on a gevent connection (as the load generator's runner does), and prints how long the
census took, the messages per second, and how much this process's resident memory grew; then
checks that every id was recorded once and that every message is still in the queue, and deletes
the queue. Used by tests/integration/test_census.py with a small N.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"


@dataclass
class CensusResult:
    depth: int  # what take_census returned
    ids: list  # the leftover rows' ids, in the order recorded
    redelivered: list  # their redelivered flags
    seconds: float
    rss_growth_bytes: int
    depth_after: int  # the queue's depth once the census closed its channel


class _Writer:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def append(self, kind: str, row: tuple) -> None:
        assert kind == "leftover", kind
        self.rows.append(row)


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fill(url: str, queue: str, n: int, prefix: str = "census-") -> None:
    """Declare `queue` afresh (purged) and publish `n` messages with ids prefix0 .. prefix{n-1}."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.queue_declare(queue, durable=False, auto_delete=False)
        ch.queue_purge(queue)
        ch.confirm_delivery()
        body = b"x" * 100
        for i in range(n):
            props = pika.BasicProperties(headers={"sojourn-id": f"{prefix}{i}"})
            ch.basic_publish("", queue, body, props)
    finally:
        conn.close()


def depth_of(url: str, queue: str) -> int:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return conn.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        conn.close()


def delete(url: str, queue: str) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        conn.channel().queue_delete(queue)
    finally:
        conn.close()


def run_census(url: str, queue: str) -> CensusResult:
    """Count `queue` with loadgen.run.census on a gevent connection, as a run's end does."""
    from gevent.event import Event

    from loadgen.amqp import connection as amqp
    from loadgen.run.census import take_census

    closed = Event()
    conn = amqp.connect(url, name="sojourn-census-bench", on_close=lambda _conn, _exc: closed.set())
    writer = _Writer()
    events: list = []
    ctx = SimpleNamespace(
        scenario=SimpleNamespace(queue=SimpleNamespace(name=queue, stream=False)),
        new_channel=lambda: amqp.open_channel(conn),
        writer=writer,
        event=lambda *args: events.append(args),
    )
    rss = _rss_bytes()
    started = time.monotonic()
    try:
        depth = take_census(ctx)
        seconds = time.monotonic() - started
        grown = _rss_bytes() - rss
    finally:
        conn.close()
        closed.wait(10.0)  # the broker has requeued what the census was sent once the close is confirmed
    return CensusResult(
        depth=depth,
        ids=[r[0] for r in writer.rows],
        redelivered=[r[3] for r in writer.rows],
        seconds=seconds,
        rss_growth_bytes=grown,
        depth_after=depth_of(url, queue),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.census", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--queue", default="sojourn.bench.census")
    args = parser.parse_args(argv)
    print(f"filling {args.queue} with {args.messages:,} messages", file=sys.stderr)
    fill(args.url, args.queue, args.messages)
    try:
        result = run_census(args.url, args.queue)
    finally:
        left = depth_of(args.url, args.queue)
        delete(args.url, args.queue)
    exact = sorted(result.ids) == sorted(f"census-{i}" for i in range(args.messages))
    print(
        f"census of {args.messages:,} messages: {result.seconds:.2f} s ({args.messages / result.seconds:,.0f} msg/s), "
        f"resident memory +{result.rss_growth_bytes / 1e6:.1f} MB (the {len(result.ids):,} trace rows included); "
        f"every id once: {exact}; still in the queue after: {left:,}"
    )
    return 0 if exact and left == args.messages else 1


if __name__ == "__main__":
    sys.exit(main())
