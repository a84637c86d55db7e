"""`python -m benchmarks.netem`: how accurate the delay-line proxy is, and what it costs.

Two measurements, side by side in one run (a benchmark, not a test: it prints numbers
and exits 0 whatever they are):

1. Applied-delay error at several message rates. Small messages go through the proxy
   (its own process, as in a run) to a TCP echo server (another process) and back.
   The proxy's self-measurement (`proxy_stats`: actual release - scheduled release)
   gives the error per direction; the client also times each echo, so the extra
   round-trip time over the configured 2 x latency is checked independently.
2. Throughput at zero delay relative to a direct connection: a pika publisher and a
   pika consumer move N messages through RabbitMQ, alternately direct and through the
   proxy, several rounds; the ratio of the medians is reported.

    python -m benchmarks.netem                        # the full benchmark (about a minute)
    python -m benchmarks.netem --quick                # about a second: the smoke test's run
    python -m benchmarks.netem --json results.json    # also write the numbers as JSON
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.scratch import scratch_dir
from loadgen.netem import LinkSettings, NetemProcess, NetworkState, Step
from loadgen.netem.measure import Histogram

MESSAGE = struct.Struct("!QQ")  # seq, send time (ns); padded to --size bytes
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"


# --- the echo server (its own process) -----------------------------------------------


class _Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        self.transport.write(data)


def _echo_server() -> int:
    async def serve():
        server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin

    asyncio.run(serve())
    return 0


def _start_echo() -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.netem", "--echo-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=_repo(),
    )
    return proc, int(proc.stdout.readline())


def _repo() -> str:
    return str(Path(__file__).resolve().parent.parent)


# --- 1. applied-delay error -----------------------------------------------------------


def _proxy_stats(run_dir: str) -> dict[str, dict]:
    import pyarrow.parquet as pq

    stats = {}
    for part in sorted(Path(run_dir, "traces", "event").glob("*.parquet")):
        for row in pq.read_table(part).to_pylist():
            if row["kind"] == "proxy_stats":
                detail = json.loads(row["detail"])
                if detail.get("scope") == "run":
                    stats[row["name"]] = detail
    return stats


def measure_error(rate: float, seconds: float, latency_ms: float, size: int = 100, connections: int = 2) -> dict:
    """Send `rate` msg/s (split over `connections`) through the proxy to an echo server and back."""
    echo, echo_port = _start_echo()
    run_dir = scratch_dir("sojourn-bench-netem-")
    link = LinkSettings(latency_ms)
    proxy = NetemProcess.start(
        f"amqp://127.0.0.1:{echo_port}/",
        [Step(0.0, "bench", NetworkState(link, link))],
        t0_ns=time.time_ns(),
        run_dir=run_dir,
        run_id="bench",
        worker="netem-bench",
    )
    socks = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(connections)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = Histogram()
    lock = threading.Lock()
    total = int(rate * seconds)
    received = [0]

    def receive(sock: socket.socket) -> None:
        buf = b""
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            now = time.monotonic_ns()
            buf += data
            whole = len(buf) - len(buf) % size
            with lock:
                for offset in range(0, whole, size):
                    _seq, sent = MESSAGE.unpack_from(buf, offset)
                    rtt.add(now - sent)
                    received[0] += 1
            buf = buf[whole:]

    readers = [threading.Thread(target=receive, args=(s,), daemon=True) for s in socks]
    for r in readers:
        r.start()
    pad = b"x" * (size - MESSAGE.size)
    interval_ns = int(1e9 / rate)
    start = time.monotonic_ns()
    for seq in range(total):
        target = start + seq * interval_ns
        delay = target - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        socks[seq % connections].sendall(MESSAGE.pack(seq, time.monotonic_ns()) + pad)
    sent_s = (time.monotonic_ns() - start) / 1e9
    deadline = time.monotonic() + 2 * latency_ms / 1000 + 2.0
    while received[0] < total and time.monotonic() < deadline:
        time.sleep(0.01)
    for s in socks:
        s.close()
    proxy.stop()
    echo.stdin.close()
    echo.wait(5)
    stats = _proxy_stats(run_dir)
    extra = [None if rtt.count == 0 else rtt.percentile_ms(q) - 2 * latency_ms for q in (50, 99)]
    return {
        "rate_per_s": rate,
        "offered_per_s": round(total / sent_s, 1),
        "messages": total,
        "received": received[0],
        "latency_ms": latency_ms,
        "size_bytes": size,
        "connections": connections,
        **{
            f"{d}_{k}": stats.get(d, {}).get(k)
            for d in ("upstream", "downstream")
            for k in ("count", "error_p50_ms", "error_p99_ms", "error_max_ms")
        },
        "rtt_extra_p50_ms": None if extra[0] is None else round(extra[0], 3),
        "rtt_extra_p99_ms": None if extra[1] is None else round(extra[1], 3),
    }


# --- 2. throughput at zero delay ------------------------------------------------------


def _move(url: str, queue: str, n: int, size: int, prefetch: int) -> float:
    """Publish n messages and consume them concurrently; messages per second end to end."""
    import pika

    done = threading.Event()
    ready = threading.Event()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=prefetch)
            ready.set()
            for count, (method, _props, _body) in enumerate(ch.consume(queue, inactivity_timeout=30), start=1):
                if method is None:
                    break
                if count % 100 == 0 or count == n:
                    ch.basic_ack(method.delivery_tag, multiple=True)
                if count == n:
                    break
            ch.cancel()
            conn.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
            ready.set()
        finally:
            done.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    ready.wait(30)
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    body = b"x" * size
    start = time.perf_counter()
    for _ in range(n):
        ch.basic_publish("", queue, body)
    done.wait(120)
    elapsed = time.perf_counter() - start
    conn.close()
    if errors:
        raise errors[0]
    return n / elapsed


def measure_throughput(url: str, n: int, rounds: int, size: int = 100, prefetch: int = 1000) -> dict:
    import pika

    queue = "sojourn.bench.netem"
    control = pika.BlockingConnection(pika.URLParameters(url))
    ch = control.channel()
    ch.queue_declare(queue, auto_delete=False)
    ch.queue_purge(queue)
    unimpaired = [Step(0.0, "bench", NetworkState())]
    proxy = NetemProcess.start(url, unimpaired, t0_ns=time.time_ns())
    direct, proxied = [], []
    try:
        for _ in range(rounds):
            direct.append(_move(url, queue, n, size, prefetch))
            proxied.append(_move(proxy.url, queue, n, size, prefetch))
    finally:
        proxy.stop()
        ch.queue_delete(queue)
        control.close()
    d, p = statistics.median(direct), statistics.median(proxied)
    return {
        "messages": n,
        "rounds": rounds,
        "size_bytes": size,
        "prefetch": prefetch,
        "direct_per_s": [round(x) for x in direct],
        "proxy_per_s": [round(x) for x in proxied],
        "direct_median_per_s": round(d),
        "proxy_median_per_s": round(p),
        "ratio": round(p / d, 3),
    }


# --- report ---------------------------------------------------------------------------


def machine_facts() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": socket.gethostname(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "loadavg_1m": os.getloadavg()[0],
    }


def _fmt(value) -> str:
    return "–" if value is None else f"{value:g}"


def render(facts: dict, errors: list[dict], throughput: dict | None) -> str:
    lines = [
        f"netem benchmark, {facts['date']} on {facts['cpus']} x {facts['cpu']} "
        f"(Python {facts['python']}, Linux {facts['kernel']}); load average at the start "
        f"{facts['loadavg_1m']:.2f}",
        "",
    ]
    if errors:
        lines += [
            "| msg/s | latency each way (ms) | messages | error p50 / p99 / max up (ms) "
            "| error p50 / p99 / max down (ms) | echo RTT over 2 x latency p50 / p99 (ms) |",
            "|---|---|---|---|---|---|",
        ]
        for r in errors:
            up = " / ".join(_fmt(r[f"upstream_{k}"]) for k in ("error_p50_ms", "error_p99_ms", "error_max_ms"))
            down = " / ".join(_fmt(r[f"downstream_{k}"]) for k in ("error_p50_ms", "error_p99_ms", "error_max_ms"))
            lines.append(
                f"| {r['rate_per_s']:g} | {r['latency_ms']:g} | {r['received']}/{r['messages']} "
                f"| {up} | {down} | {_fmt(r['rtt_extra_p50_ms'])} / {_fmt(r['rtt_extra_p99_ms'])} |"
            )
        lines.append("")
    if throughput:
        t = throughput
        lines += [
            f"zero-delay throughput, {t['messages']} messages of {t['size_bytes']} B per trial, "
            f"{t['rounds']} rounds: direct {t['direct_median_per_s']} msg/s, proxy "
            f"{t['proxy_median_per_s']} msg/s (median): ratio {t['ratio']:.3f}",
            f"  direct {t['direct_per_s']}  proxy {t['proxy_per_s']}",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.netem", description=__doc__.split("\n")[0])
    p.add_argument("--rates", default="500,1000,2000,5000", help="message rates for the error measurement")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per rate")
    p.add_argument("--latency-ms", type=float, default=20.0, help="delay each way during the error measurement")
    p.add_argument("--messages", type=int, default=20000, help="messages per throughput trial")
    p.add_argument("--rounds", type=int, default=3, help="throughput trials per path (direct, proxy)")
    p.add_argument(
        "--url", default=os.environ.get("SOJOURN_AMQP_URL") or DEFAULT_URL, help="broker for the throughput measurement"
    )
    p.add_argument("--no-throughput", action="store_true", help="skip the broker measurement")
    p.add_argument("--quick", action="store_true", help="about a second: one low rate, a tiny trial")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.echo_server:
        return _echo_server()
    if args.quick:
        args.rates, args.seconds, args.messages, args.rounds = "500", 0.3, 300, 1
    facts = machine_facts()
    errors = [measure_error(float(r), args.seconds, args.latency_ms) for r in args.rates.split(",") if r]
    throughput = None if args.no_throughput else measure_throughput(args.url, args.messages, args.rounds)
    print(render(facts, errors, throughput))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"machine": facts, "error": errors, "throughput": throughput}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
