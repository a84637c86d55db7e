"""One benchmark trial in its own gevent-patched process: `python -m benchmarks.trial SPEC_JSON`.

The orchestrator (`python -m benchmarks`) starts one of these per trial so that A and B
run in the same kind of fresh process, alternately; the trial prints one JSON line:
`{"messages": n, "seconds": s, "per_s": r, "cpu_s": c}`.

Variants: `bare` is a plain pika GeventConnection script (no Locust, no tracing);
`sojourn` drives loadgen's Producer or Consumer with a RunContext, its trace writer and
Locust's request event; `sojourn-notrace` is the same with a writer that drops rows;
`sojourn-readstamp` the same consumer with kernel receive stamps off (loadgen.amqp.kstamp);
`sojourn-metrics` the same with live metrics on (loadgen.metrics: the trace writer's process
folds every batch into them; nothing scrapes); `sojourn-listener` the same with one more
`request` listener, which counts (every message then reaches it: loadgen.run.locust_stats).
A publish counts only once its bytes have left the client (or its confirm arrived):
both loops wait while pika's write buffer holds more than the producer's limit, and the
clock stops when the buffer is empty.
"""

from gevent import monkey

monkey.patch_all()

import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import pika  # noqa: E402
from gevent.event import Event  # noqa: E402

from benchmarks.cpu import TICK_S, _machine_ticks, _stat  # noqa: E402
from benchmarks.scratch import scratch_dir  # noqa: E402
from loadgen.users.producer import WRITE_BUFFER_LIMIT  # noqa: E402

QUEUE = os.environ.get("SOJOURN_BENCH_QUEUE", "sojourn.bench.loadpath")  # set by python -m benchmarks
BODY_BYTES = 100


class Window:
    """The measured stretch of a trial: wall-clock seconds, this process's CPU seconds and, for a
    traced sojourn trial, the CPU seconds of the trace writer's child process in the same stretch;
    the whole machine's busy CPU seconds (the broker's included); also the garbage collector's
    pauses in this process (each one stops the I/O loop)."""

    def __init__(self, child_pid: int | None = None):
        self.child_pid = child_pid
        self.gc_s = self.gc_worst_s = 0.0
        self._gc_began = 0.0

    def _child_s(self) -> float:
        st = _stat(self.child_pid) if self.child_pid else None
        return st[2] * TICK_S if st else 0.0

    def _on_gc(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            pause = time.perf_counter() - self._gc_began
            self.gc_s += pause
            self.gc_worst_s = max(self.gc_worst_s, pause)

    def start(self) -> "Window":
        gc.callbacks.append(self._on_gc)
        self.t0, self.cpu0, self.child0 = time.perf_counter(), time.process_time(), self._child_s()
        self.busy0 = _machine_ticks()[0]
        return self

    def stop(self) -> "Window":
        self.seconds = time.perf_counter() - self.t0
        self.cpu_s = time.process_time() - self.cpu0
        self.child_end_s = self._child_s()
        self.child_cpu_s = self.child_end_s - self.child0
        self.machine_cpu_s = (_machine_ticks()[0] - self.busy0) * TICK_S
        gc.callbacks.remove(self._on_gc)
        return self


def _writer_pid(ctx) -> int | None:
    child = getattr(ctx.writer, "_child", None)
    return child.proc.pid if child is not None else None


# --- bare pika on gevent --------------------------------------------------------------


def _bare_channel(url: str):
    """A connection and channel as a plain pika script opens them: pika's GeventConnection as it
    comes (none of loadgen's tuning, loadgen.amqp.fastio), waited for with gevent events."""
    from pika.adapters.gevent_connection import GeventConnection

    opened, channel = Event(), []
    params = pika.URLParameters(url)
    params.client_properties = {"connection_name": "bench-bare"}
    conn = GeventConnection(
        params, on_open_callback=lambda _c: opened.set(), on_open_error_callback=lambda _c, exc: opened.set()
    )
    if not opened.wait(15) or not conn.is_open:
        raise SystemExit(f"bare pika could not connect to {url}")
    conn.channel(on_open_callback=lambda ch: (channel.append(ch), opened.set()))
    opened.clear()
    opened.wait(15)
    return conn, channel[0]


def _drain_writes(conn) -> None:
    transport = getattr(conn, "_transport", None)
    while transport is not None and transport.get_write_buffer_size() > 0:
        gevent.sleep(0.0005)


class BareConfirms:
    """What a plain pika publisher keeps for a confirm window: publishes outstanding, confirms
    received, and an event set whenever a confirm frees a slot. `select(ch)` turns confirms on."""

    def __init__(self) -> None:
        self.outstanding = [0]
        self.confirmed = [0]
        self.window = Event()
        self.window.set()

    def _on_confirm(self, frame) -> None:
        m = frame.method
        n = m.delivery_tag - self.confirmed[0] if m.multiple else 1
        self.confirmed[0] += n
        self.outstanding[0] -= n
        self.window.set()

    def select(self, ch) -> None:
        done = Event()
        ch.confirm_delivery(self._on_confirm, callback=lambda _f: done.set())
        done.wait(10)


def bare_publish(url: str, seconds: float, confirm_window: int) -> tuple[int, Window]:
    conn, ch = _bare_channel(url)
    ch.queue_purge(QUEUE)
    body = b"x" * BODY_BYTES
    confirms = BareConfirms()
    outstanding, confirmed, window = confirms.outstanding, confirms.confirmed, confirms.window
    if confirm_window:
        confirms.select(ch)
    transport = conn._transport
    sent = 0
    clock = Window().start()
    end = clock.t0 + seconds
    while time.perf_counter() < end:
        while confirm_window and outstanding[0] >= confirm_window:
            window.clear()
            window.wait(1.0)
        while transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            gevent.sleep(0.0005)
        ch.basic_publish("", QUEUE, body, pika.BasicProperties(delivery_mode=1))
        sent += 1
        outstanding[0] += 1
    _drain_writes(conn)
    while confirm_window and outstanding[0] > 0 and time.perf_counter() < end + 5:
        gevent.sleep(0.001)
    clock.stop()
    conn.close()
    return (confirmed[0] if confirm_window else sent), clock


def bare_consume(url: str, messages: int, prefetch: int) -> tuple[int, Window]:
    conn, ch = _bare_channel(url)
    done = Event()
    qos = Event()
    ch.basic_qos(prefetch_count=prefetch, callback=lambda _f: qos.set())
    qos.wait(10)
    count = [0]

    def on_message(channel, method, props, body):
        headers = props.headers or {}
        headers.get("sojourn-id"), headers.get("sojourn-pub-ns")
        channel.basic_ack(method.delivery_tag)
        count[0] += 1
        if count[0] >= messages:
            done.set()

    clock = Window().start()
    ch.basic_consume(QUEUE, on_message)
    done.wait(120)
    _drain_writes(conn)
    clock.stop()
    conn.close()
    return count[0], clock


# --- sojourn's load path ---------------------------------------------------------------


class DroppingWriter:
    """A TraceWriter stand-in that keeps nothing: the tracing-off side of the overhead benchmark."""

    def append(self, kind, row):
        pass

    def flush(self, run_in=None):
        pass

    def flush_kind(self, kind, run_in=None):
        pass

    def pending(self):
        return 0

    def close(self):
        pass


def _context(url: str, seconds: float, producer: str, consumer: str, trace: bool, variant: str = "sojourn"):
    import locust  # noqa: F401 - Locust's own event hooks, as in a run
    from locust.env import Environment

    from loadgen.run import locust_session
    from loadgen.run.runtime import RunContext, freeze_heap
    from loadgen.scenario import load_scenario

    yaml = (
        f"name: bench\nbroker: {{url: '{url}'}}\nqueue: {{name: {QUEUE}, purge_on_start: true}}\n"
        f"run: {{duration_s: {seconds}, warmup_s: 0, drain_timeout_s: 5}}\n"
        f"producers:\n  - {{name: p, {producer}}}\nconsumers:\n  - {{name: c, {consumer}}}\n"
    )
    run_dir = scratch_dir("sojourn-bench-")
    Path(run_dir, "bench.yaml").write_text(yaml)
    scenario = load_scenario(Path(run_dir, "bench.yaml"), env={})
    env = Environment()
    env.create_local_runner()
    metrics_fd = None
    if variant == "sojourn-metrics":
        from loadgen.broker.local import free_loopback_port
        from loadgen.metrics import endpoint

        metrics_fd = endpoint.listen(free_loopback_port(), "127.0.0.1").detach()
    if variant == "sojourn-listener":
        heard = [0]

        def count(**_kw):
            heard[0] += 1

        env.events.request.add_listener(count)
    ctx = RunContext(scenario, run_dir, "bench", "local", metrics_fd=metrics_fd)
    if not trace:
        ctx.writer.close()
        ctx.writer = DroppingWriter()
    else:  # the writer's first part (run_start) is on disk: its process is up, pyarrow loaded
        ctx.writer.flush()
    freeze_heap()  # as a run's set-up ends (loadgen.run.locust_session.start)
    return ctx, locust_session.reporter(env)


def sojourn_publish(
    url: str, seconds: float, confirm_window: int, trace: bool, variant: str = "sojourn"
) -> tuple[int, Window]:
    from loadgen.users.producer import Producer

    confirms = f"confirms: true, confirm_window: {confirm_window}" if confirm_window else "confirms: false"
    ctx, report = _context(
        url, 3600, f"rate: 1000000, arrival: constant, size_bytes: {BODY_BYTES}, {confirms}", "count: 0", trace, variant
    )
    ctx.declare_topology(purge=True)
    p = Producer(ctx, "p", 0, report)
    p._join(ctx.scenario.producer("p"))  # connected before the clock starts, as the bare loop is
    clock = Window(_writer_pid(ctx)).start()
    # The schedule asks for more than any loop can send, and a late producer only looks at
    # `stopping` through its pre-publish sleep, so the loop's own sleep checks the clock, as the
    # bare loop does (both sleeps: `sleep_until_precise` paces publishes, `sleep_until` the
    # segments). run() then waits for the outstanding confirms and closes the connection,
    # which sends what is left in the write buffer.
    deadline = clock.t0 + seconds
    sleep_until, sleep_until_precise = ctx.sleep_until, ctx.sleep_until_precise
    ctx.sleep_until = lambda t, interrupt=None: time.perf_counter() < deadline and sleep_until(t, interrupt)
    ctx.sleep_until_precise = lambda t, interrupt: time.perf_counter() < deadline and sleep_until_precise(t, interrupt)
    p.run()
    clock.stop()
    n = ctx.counters["confirmed" if confirm_window else "published"]
    ctx.close()
    return n, clock


def sojourn_consume(
    url: str, messages: int, prefetch: int, trace: bool, variant: str = "sojourn"
) -> tuple[int, Window]:
    from loadgen.users.consumer import Consumer

    ctx, report = _context(url, 3600, "count: 0, rate: 1", f"prefetch: {prefetch}, processing_ms: 0", trace, variant)
    c = Consumer(ctx, "c", 0, report)
    c._join(ctx.scenario.at(0).consumer("c"))  # connected (and consuming) before the clock starts, as bare is
    clock = Window(_writer_pid(ctx)).start()
    g = gevent.spawn(c.run)
    while ctx.counters["acked"] < messages and time.perf_counter() < clock.t0 + 120:
        gevent.sleep(0.005)
    _drain_writes(c._link.connection)
    clock.stop()
    n = ctx.counters["acked"]
    ctx.stopping.set()
    g.join(10)
    ctx.close()
    return n, clock


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    cpu0 = time.process_time()
    kind, variant, url = spec["kind"], spec["variant"], spec["url"]
    trace = variant != "sojourn-notrace"
    if kind == "publish":
        if variant == "bare":
            n, w = bare_publish(url, spec["seconds"], spec["confirm_window"])
        else:
            n, w = sojourn_publish(url, spec["seconds"], spec["confirm_window"], trace, variant)
    elif kind == "consume":
        if variant == "bare":
            n, w = bare_consume(url, spec["messages"], spec["prefetch"])
        else:
            if variant == "sojourn-readstamp":  # receive stamps at the read: what kernel stamps cost
                from loadgen.amqp import kstamp

                kstamp.enable = lambda _conn: "turned off for the benchmark"
            n, w = sojourn_consume(url, spec["messages"], spec["prefetch"], trace, variant)
    else:
        raise SystemExit(f"unknown trial kind {kind!r}")
    cpu = time.process_time() - cpu0  # includes imports and connecting: a hint, not a measurement
    # The trace writer's child converts what it spilled once its input ends (ctx.close(), after
    # the window): its whole CPU time, now that it was waited for, less what it had used by then.
    child_s = resource.getrusage(resource.RUSAGE_CHILDREN)
    after_s = max(0.0, child_s.ru_utime + child_s.ru_stime - w.child_end_s) if w.child_pid else 0.0
    print(
        json.dumps(
            {
                "messages": n,
                "seconds": round(w.seconds, 4),
                "per_s": round(n / w.seconds, 1),
                "cpu_s": round(cpu, 3),
                # CPU per message in the measured window: the loop's process, the trace writer's child
                "cpu_us": round(w.cpu_s / max(n, 1) * 1e6, 2),
                "child_cpu_us": round(w.child_cpu_s / max(n, 1) * 1e6, 2),
                # the same child's CPU after the window, converting its spilled batches
                "child_after_us": round(after_s / max(n, 1) * 1e6, 2),
                # the whole machine's (broker, loop, child, anything else): what the 2 cores pay
                "machine_cpu_us": round(w.machine_cpu_s / max(n, 1) * 1e6, 2),
                # the collector's pauses in the window: per message, and the longest
                "gc_us": round(w.gc_s / max(n, 1) * 1e6, 2),
                "gc_worst_ms": round(w.gc_worst_s * 1e3, 2),
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
