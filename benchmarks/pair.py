"""One side of the bare pika pair: `python -m benchmarks.pair SPEC_JSON` (publisher or consumer).

The end-to-end benchmark (benchmarks.endtoend) starts a publisher and a consumer as two
gevent processes on one queue. Each prints `ready` once connected, then waits for the
orchestrator's start file (holding the wall-clock start, in ns) so both measure the same
window; the publisher publishes with confirms (window `confirm_window`) from the start for
`seconds`, the consumer acks every delivery (manual ack, prefetch `prefetch`) and stops at
the end of the window. Each prints one JSON line.

Consumer: `{"acked": n, "acked_in_window": m}`, where the window is [start + warmup_s,
start + seconds], counted by the wall-clock time of each ack (as sojourn's `settle_ns`).
Publisher: `{"published": n, "confirmed": m, "late_start_ms": x}`.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
import pika  # noqa: E402
from gevent.event import Event  # noqa: E402

from benchmarks.trial import BODY_BYTES, BareConfirms, _bare_channel, _drain_writes  # noqa: E402
from loadgen.users.producer import WRITE_BUFFER_LIMIT  # noqa: E402


def _wait_start(path: str) -> int:
    while not os.path.exists(path):
        gevent.sleep(0.005)
    with open(path) as f:
        return int(f.read().strip())


def _sleep_until_ns(t_ns: int) -> None:
    while time.time_ns() < t_ns:
        gevent.sleep(min(0.01, max(0.0, (t_ns - time.time_ns()) / 1e9)))


def publisher(spec: dict) -> dict:
    conn, ch = _bare_channel(spec["url"])
    window_size = spec["confirm_window"]
    confirms = BareConfirms()
    outstanding, confirmed, window = confirms.outstanding, confirms.confirmed, confirms.window
    confirms.select(ch)
    print("ready", flush=True)
    start_ns = _wait_start(spec["start_file"])
    _sleep_until_ns(start_ns)
    late_start_ms = (time.time_ns() - start_ns) / 1e6
    end_ns = start_ns + int(spec["seconds"] * 1e9)
    transport = conn._transport
    body = b"x" * BODY_BYTES
    props = pika.BasicProperties(delivery_mode=1)
    queue = spec["queue"]
    sent = 0
    while time.time_ns() < end_ns:
        while outstanding[0] >= window_size:
            window.clear()
            window.wait(1.0)
        while transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            gevent.sleep(0.0005)
        ch.basic_publish("", queue, body, props)
        sent += 1
        outstanding[0] += 1
    _drain_writes(conn)
    deadline = time.monotonic() + 10
    while outstanding[0] > 0 and time.monotonic() < deadline:
        gevent.sleep(0.001)
    conn.close()
    return {"published": sent, "confirmed": confirmed[0], "late_start_ms": round(late_start_ms, 1)}


def consumer(spec: dict) -> dict:
    conn, ch = _bare_channel(spec["url"])
    qos = Event()
    ch.basic_qos(prefetch_count=spec["prefetch"], callback=lambda _f: qos.set())
    qos.wait(10)
    counts = {"acked": 0, "in_window": 0}
    bounds = [0, 0]  # the window, once the start is known; nothing counts in it before

    def on_message(channel, method, props, body):
        headers = props.headers or {}
        headers.get("sojourn-id"), headers.get("sojourn-pub-ns")  # what sojourn's consumer reads
        channel.basic_ack(method.delivery_tag)
        now = time.time_ns()
        counts["acked"] += 1
        if bounds[0] <= now <= bounds[1]:
            counts["in_window"] += 1

    consuming = Event()
    ch.basic_consume(spec["queue"], on_message, callback=lambda _f: consuming.set())
    consuming.wait(10)
    print("ready", flush=True)
    start_ns = _wait_start(spec["start_file"])
    bounds[:] = [start_ns + int(spec["warmup_s"] * 1e9), start_ns + int(spec["seconds"] * 1e9)]
    _sleep_until_ns(bounds[1] + 200_000_000)
    _drain_writes(conn)
    conn.close()
    return {"acked": counts["acked"], "acked_in_window": counts["in_window"]}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    cpu0 = time.process_time()
    result = publisher(spec) if spec["side"] == "publisher" else consumer(spec)
    result["cpu_s"] = round(time.process_time() - cpu0, 3)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
