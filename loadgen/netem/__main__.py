"""`python -m loadgen.netem`: the network impairment proxy as its own process.

Started by the load generator (`loadgen.netem.process.NetemProcess`) in a clean
interpreter, because Locust's process is gevent-monkey-patched. It prints its
listening port as the first line on stdout, applies the impairment timeline
against the wall clock (elapsed = (time.time_ns() - t0_ns) / 1e9), records every
change and its own measurements as `event` trace rows, and exits cleanly on
SIGTERM, on stdin reaching EOF (its parent is gone) or at --exit-after.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable

from loadgen.netem.link import NetworkState
from loadgen.netem.measure import DirectionMeter
from loadgen.netem.proxy import DIRECTIONS, Proxy, new_event_loop
from loadgen.netem.timeline import Step, resets, step_index_at, timeline_from_json, transitions

log = logging.getLogger("sojourn.netem")

SOURCE = "netem"
FLUSH_EVERY_S = 1.0


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m loadgen.netem", description="Delay-line TCP proxy between sojourn's clients and the broker."
    )
    p.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the broker's address")
    p.add_argument("--listen-port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--timeline", required=True, help="the resolved impairment timeline (JSON)")
    p.add_argument("--t0-ns", type=int, default=0, help="wall-clock ns of the run's time 0 (default: now)")
    p.add_argument(
        "--wait-for-t0",
        action="store_true",
        help="hold the timeline's first state until a line 't0 NS' on stdin fixes time 0 (the start barrier)",
    )
    p.add_argument("--run-dir", default="", help="write event traces to RUN_DIR/traces/event")
    p.add_argument("--run-id", default="")
    p.add_argument("--worker", default="", help="worker name in the traces (default netem-<host>-<pid>)")
    p.add_argument("--seed", type=int, default=None, help="seed for the jitter draws")
    p.add_argument("--exit-after", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--watch-stdin",
        action="store_true",
        help="stop when stdin reaches EOF (the parent holds a pipe to it and died)",
    )
    return p.parse_args(argv)


def _split_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"--upstream must be HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


PRIORITY_ENV = "SOJOURN_NETEM_PRIORITY"


def _sharpen_timers() -> None:
    """Timer slack down from 50 µs to 1 µs; the GIL handed back within 0.5 ms when a trace
    flush thread runs."""
    sys.setswitchinterval(0.0005)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
    except (OSError, AttributeError):
        pass


class _Scheduling:
    """Real-time scheduling while a delay is configured, normal scheduling while there is none.

    On a host whose CPUs are busy with the broker and the load, a normal process waits
    milliseconds for a CPU after its timer fires, which is exactly what a delay line
    must not add; so while any delay, jitter or bandwidth cap is in force the proxy asks
    for SCHED_FIFO (priority 10; allowed for root or with CAP_SYS_NICE). It only runs when
    bytes arrive or are due. With no impairment there is no timing to keep, and
    preempting the broker for every small chunk would only cost throughput, so it runs
    at normal priority. SOJOURN_NETEM_PRIORITY=normal keeps normal priority throughout.
    """

    def __init__(self) -> None:
        self.allowed = os.environ.get(PRIORITY_ENV, "").lower() != "normal" and hasattr(os, "SCHED_FIFO")
        self.current = "normal"
        self.ever: set[str] = set()

    def set_for(self, state: NetworkState) -> str:
        precise = not (state.upstream.transparent and state.downstream.transparent)
        wanted = "realtime" if precise and self.allowed else "normal"
        if wanted != self.current:
            try:
                if wanted == "realtime":
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
                else:
                    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
                self.current = wanted
            except OSError:
                self.allowed = False  # not permitted here: stay as we are
        self.ever.add(self.current)
        return self.current


class _Recorder:
    """Event rows for the run's traces (nothing is written without --run-dir)."""

    def __init__(self, args: argparse.Namespace):
        self.writer = None
        if args.run_dir:
            from loadgen.trace import TraceWriter

            worker = args.worker or f"netem-{socket.gethostname()}-{os.getpid()}"
            self.writer = TraceWriter(args.run_dir, args.run_id, worker)

    def event(self, kind: str, name: str, value: float | None = None, detail: dict | None = None) -> None:
        if self.writer is not None:
            self.writer.append(
                "event",
                (time.time_ns(), kind, SOURCE, name, value, json.dumps(detail, sort_keys=True) if detail else None),
            )

    async def flush(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.writer is not None and self.writer.pending():
            await loop.run_in_executor(None, self.writer.flush)  # never a file write on the loop

    def flush_now(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class _Runner:
    def __init__(self, args: argparse.Namespace, steps: tuple[Step, ...], proxy: Proxy, recorder: _Recorder):
        self.args = args
        self.steps = steps
        self.proxy = proxy
        self.recorder = recorder
        self.t0_ns = args.t0_ns or time.time_ns()
        self.stop = asyncio.Event()
        self.started = asyncio.Event()  # t0 is known (at once, unless --wait-for-t0)
        if not args.wait_for_t0:
            self.started.set()
        self.period_meters = {d: DirectionMeter() for d in DIRECTIONS}
        self.run_meters = {d: DirectionMeter() for d in DIRECTIONS}
        self.current: Step | None = None
        self.period_start_s = 0.0
        self.scheduling = _Scheduling()

    def elapsed_s(self) -> float:
        return (time.time_ns() - self.t0_ns) / 1e9

    def _record_step(self, previous: NetworkState | None, step: Step) -> None:
        detail = step.to_dict()
        for kind in transitions(previous, step):
            self.recorder.event(kind, step.phase, None, detail)
        s = step.state
        sys.stderr.write(
            f"[netem] t={self.elapsed_s():.1f}s {step.phase}: up {s.upstream.latency_ms:g}+{s.upstream.jitter_ms:g} ms"
            f" down {s.downstream.latency_ms:g}+{s.downstream.jitter_ms:g} ms"
            f"{' DOWN' if s.down else ''}{' RESET' if resets(previous, step) else ''}\n"
        )

    def _close_period(self, scope: str = "period") -> None:
        """proxy_stats per direction for the period that ends now (and, at the end, the whole run)."""
        now_s = self.elapsed_s()
        for d in DIRECTIONS:
            taken = self.proxy.meters[d].take()
            self.run_meters[d].merge(taken)
            if self.current is not None:
                configured = getattr(self.current.state, d)
                detail = {
                    "scope": "period",
                    "direction": d,
                    "phase": self.current.phase,
                    "at_s": self.current.at_s,
                    "from_s": round(self.period_start_s, 6),
                    "to_s": round(now_s, 6),
                    "configured": configured.to_dict(),
                    **taken.summary(),
                }
                self.recorder.event("proxy_stats", d, detail["error_p99_ms"], detail)
        self.period_start_s = now_s
        if scope == "run":
            for d in DIRECTIONS:
                summary = self.run_meters[d].summary()
                detail = {"scope": "run", "direction": d, "scheduling": sorted(self.scheduling.ever), **summary}
                self.recorder.event("proxy_stats", d, summary["error_p99_ms"], detail)

    async def enter(self, index: int) -> None:
        step = self.steps[index]
        previous = self.current.state if self.current is not None else None
        if self.current is not None:
            self._close_period()
        await self.proxy.apply(step.state, reset=resets(previous, step))
        self.scheduling.set_for(step.state)
        self.current = step
        self._record_step(previous, step)

    def fix_t0(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.started.set()

    async def follow_timeline(self) -> None:
        started = asyncio.ensure_future(self.started.wait())
        stopped = asyncio.ensure_future(self.stop.wait())
        await asyncio.wait((started, stopped), return_when=asyncio.FIRST_COMPLETED)
        for waiter in (started, stopped):
            waiter.cancel()
        index = step_index_at(self.steps, self.elapsed_s())
        for i in range(index + 1, len(self.steps)):
            # Sleep towards the wall-clock time of the step, re-reading the clock as we go.
            while not self.stop.is_set():
                remaining = self.steps[i].at_s - self.elapsed_s()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(self.stop.wait(), timeout=min(remaining, 1.0))
                except asyncio.TimeoutError:
                    pass
            if self.stop.is_set():
                return
            await self.enter(i)

    async def flush_loop(self, loop) -> None:
        while not self.stop.is_set():
            try:
                await asyncio.wait_for(self.stop.wait(), timeout=FLUSH_EVERY_S)
            except asyncio.TimeoutError:
                await self.recorder.flush(loop)


async def _main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    steps = timeline_from_json(args.timeline)
    host, port = _split_host_port(args.upstream)
    import random

    proxy = Proxy(
        host,
        port,
        listen_port=args.listen_port,
        state=NetworkState(),
        rng=random.Random(args.seed),
        reuse_port=args.listen_port != 0,
    )
    recorder = _Recorder(args)
    runner = _Runner(args, steps, proxy, recorder)
    try:
        listen_port = await proxy.start()
    except OSError as exc:
        sys.stderr.write(f"error: netem cannot listen on 127.0.0.1:{args.listen_port}: {exc}\n")
        return 2
    await runner.enter(step_index_at(steps, runner.elapsed_s()))
    # The first Parquet write pays pyarrow's first-use costs (it held the GIL ~10 ms in a flush
    # thread mid-run): pay them now, before any connection, and have the first event on disk.
    recorder.flush_now()
    # What exists now (modules, the loop) lives for the whole run: keep the collector from
    # walking it on every full collection, a pause of several ms mid-run otherwise.
    gc.collect()
    gc.freeze()
    sys.stderr.write(
        f"[netem] 127.0.0.1:{listen_port} -> {host}:{port}"
        f"{'' if runner.scheduling.allowed else ' (real-time scheduling not permitted)'}\n"
    )
    sys.stdout.write(f"{listen_port}\n")
    sys.stdout.flush()

    loop.add_signal_handler(signal.SIGTERM, runner.stop.set)
    if args.watch_stdin:
        _watch_parent(loop, runner.stop, runner.fix_t0)
    if args.exit_after is not None:
        loop.call_later(args.exit_after, runner.stop.set)
    tasks = [loop.create_task(runner.follow_timeline()), loop.create_task(runner.flush_loop(loop))]
    await runner.stop.wait()
    for task in tasks:
        task.cancel()
    runner._close_period(scope="run")
    await proxy.close()
    recorder.close()
    return 0


def _watch_parent(loop: asyncio.AbstractEventLoop, stop: asyncio.Event, on_t0: Callable[[int], None]) -> None:
    """stdin is a pipe from the parent: EOF means the parent is gone, so the proxy goes too. The
    parent also writes the run's t0 there once the start barrier fixes it: a line `t0 NS`."""
    if sys.stdin is None:
        return
    fd = sys.stdin.fileno()
    pending = bytearray()

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            stop.set()
            return
        pending.extend(data)
        while b"\n" in pending:
            line, _, rest = bytes(pending).partition(b"\n")
            pending[:] = rest
            word, _, value = line.decode(errors="replace").partition(" ")
            if word == "t0" and value.strip().isdigit():
                on_t0(int(value))

    try:
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us in order
    logging.basicConfig(level=logging.WARNING, format="[netem] %(message)s")
    _sharpen_timers()
    loop = new_event_loop()
    try:
        return loop.run_until_complete(_main(args))
    finally:
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
