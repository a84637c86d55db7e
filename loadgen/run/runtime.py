"""Per-process run state: the clock, the trace writer, the control connection and the drain.

One RunContext lives in every process that takes part in a run (the local runner,
the master, each worker). It owns what the users share: t0, the scenario, the
trace writer, a control connection for topology and queue-depth checks, and the
events that say when the run has started (`started`: t0 is fixed, loadgen.rules.barrier),
publishing stops (`draining`) and consumers may leave (`drained`).
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event
from gevent.lock import RLock

from loadgen.amqp import connection as amqp, topology
from loadgen.errors import BrokerOperationFailed
from loadgen.replay.sources import load_sources
from loadgen.rules.lateness import Lateness
from loadgen.rules.repeats import HeldBack
from loadgen.rules.schedule import producer_rng
from loadgen.run.deadletter import DeadLetterCapture, capture_plan
from loadgen.scenario.names import slot_queue_name
from loadgen.scenario.topology import required_exchanges
from loadgen.trace import TraceWriter

if TYPE_CHECKING:
    from loadgen.netem import NetemProcess

__all__ = ["RunContext", "Participant", "worker_name", "freeze_heap"]

log = logging.getLogger("sojourn")

DRAIN_POLL_S = 0.25
FLUSH_EVERY_S = 1.0
DRAIN_STABLE_CHECKS = 3
LATENESS_EVERY_S = 5.0
SPIN_MARGIN_S = 0.002  # sleep_until_precise: yield-loop this long before a deadline instead of a timer
# A yield that lets the event loop turn: gevent.sleep(0) runs pending callbacks but reaches the
# loop's timers and sockets only now and then (a 0.5 ms timer woke 33 times in 100 ms of a greenlet
# yielding with sleep(0), up to 7 ms late; 206 times, at most 0.7 ms late, with this timeout).
LOOP_TURN_S = 1e-6


def freeze_heap() -> None:
    """Call once the run is set up, before the load: what exists then (modules, Locust, pika, the
    scenario, the control connection) lives for the whole run, and a full collection that walks it
    all stops the I/O loop for tens of milliseconds, delaying every receive stamp behind it. Frozen,
    it is left out of every collection; what the run allocates later is collected as usual. The
    longest collection of a traced consumer at 12,000-15,000 msg/s: 28-35 ms before, 4-9 ms after
    (benchmarks/NOTES.md)."""
    gc.collect()
    gc.freeze()


class Participant:
    """Base of producers and consumers: who they are in the run, and what the drain asks."""

    def __init__(self, ctx: RunContext, group: str, slot: int, report):
        self.ctx = ctx
        self.group = group
        self.slot = slot
        self.name = f"{group}/{ctx.worker}/{slot}"
        self.report = report  # report(request_type, name, response_time_ms, length, exception)
        # The same seed in every process and every rerun of this run id.
        self.rng = self.stream("")

    def stream(self, purpose: str):
        """A random stream of this participant's for `purpose` ("" is `rng`): the same in every
        process and rerun of the run id, and independent of its other streams."""
        return producer_rng(_seed(self.ctx.run_id), f"{self.name}/{purpose}" if purpose else self.name)

    def idle(self) -> bool:
        """True when nothing of this participant's is still in flight."""
        return True

    def prepare(self) -> None:
        """Before t0: connect (and subscribe) as the settings at time 0 ask, so the run starts
        with everyone ready (loadgen.rules.barrier). Nothing to do for a slot idle at time 0."""


def _seed(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class RunContext:
    def __init__(self, scenario, run_dir: str, run_id: str, role: str, t0_ns: int | None = None):
        self.scenario = scenario
        self.run_dir = run_dir
        self.run_id = run_id
        self.role = role  # local | master | worker
        self.worker = worker_name()
        # Provisional until the start barrier fixes it (fix_t0): nothing runs on the clock before.
        self.t0_ns = t0_ns or time.time_ns()
        self._t0_mono = time.monotonic() - (time.time_ns() - self.t0_ns) / 1e9
        self.started = Event()  # t0 is fixed: schedules, warm-up and samplers count from it
        self._ready: set[Participant] = set()  # participants ready to start (prepared)
        self.on_ready: Callable[[int], None] = lambda _count: None  # told each time one more is ready
        self.writer = TraceWriter(
            run_dir, run_id, self.worker, offload=lambda fn: gevent.get_hub().threadpool.spawn(fn)
        )
        self.draining = Event()  # publishing must stop
        self.drained = Event()  # consumers may leave
        self.finished = Event()  # every local participant has left
        self.stopping = Event()  # the run is being torn down (normal end or interrupt)
        self.participants: list[Participant] = []
        self.counters = {"published": 0, "confirmed": 0, "delivered": 0, "acked": 0}
        self.lateness = Lateness()  # publish lateness, for the console's "fell behind" warning
        self._claimed: set[tuple[str, str, int]] = set()
        self._control = None
        self._control_conn = None
        self._control_lock = RLock()
        self._greenlets: list[gevent.Greenlet] = []
        # the network impairment proxy participants connect through (start_netem)
        self.netem: NetemProcess | None = None
        self.dead_letter_plan = capture_plan(scenario)  # every process's drain waits on its capture queue
        self.dead_letters: DeadLetterCapture | None = None  # the capture, in the process that declares
        self.replay_traces = load_sources(scenario)  # group -> trace (parsed once per process)
        self.event("run_start", "runner", self.role)
        self._greenlets.append(gevent.spawn(self._flush_loop))

    # -- time ---------------------------------------------------------------
    def fix_t0(self, t0_ns: int, detail: dict[str, Any]) -> None:
        """The start barrier's t0 (loadgen.rules.barrier): the clock, this process's network proxy and
        everyone waiting in ready_to_start count from it; a `start_barrier` event records it."""
        self.t0_ns = t0_ns
        self._t0_mono = time.monotonic() - (time.time_ns() - t0_ns) / 1e9
        if self.netem is not None:
            self.netem.set_t0(t0_ns)
        self.event("start_barrier", "runner", self.role, detail={"t0_ns": t0_ns, **detail})
        self.started.set()

    def ready_to_start(self, participant: Participant) -> bool:
        """`participant` is prepared: count it (once) and wait for t0; False if the run stopped first."""
        if participant not in self._ready:  # by identity: a producer and a consumer group may share a name
            self._ready.add(participant)
            self.on_ready(len(self._ready))
        gevent.wait([self.started, self.stopping], count=1)
        return self.started.is_set() and not self.stopping.is_set()

    def elapsed_s(self) -> float:
        """Seconds since t0 on the monotonic clock (durations inside this process)."""
        return time.monotonic() - self._t0_mono

    def sleep_until(self, t_s: float, interrupt: Event | None = None) -> bool:
        """Sleep until elapsed time t_s; return False if `interrupt` fired first (or had already)."""
        delay = t_s - self.elapsed_s()
        if delay <= 0:
            return interrupt is None or not interrupt.is_set()
        if interrupt is None:
            gevent.sleep(delay)
            return True
        return not interrupt.wait(delay)

    def sleep_until_precise(self, t_s: float, interrupt: Event) -> bool:
        """Like sleep_until, to within tens of microseconds: a gevent timer wakes up to a few ms
        late (epoll waits in whole milliseconds), so wait on the timer until SPIN_MARGIN_S before
        `t_s`, then yield to the hub (which keeps serving sockets) until `t_s` arrives. Costs at
        most SPIN_MARGIN_S of CPU per call; used for publish times, where lateness is measured."""
        delay = t_s - self.elapsed_s()
        if delay > SPIN_MARGIN_S and interrupt.wait(delay - SPIN_MARGIN_S):
            return False
        while self.elapsed_s() < t_s:
            if interrupt.is_set():
                return False
            gevent.sleep(LOOP_TURN_S)  # the loop keeps reading sockets meanwhile
        return not interrupt.is_set()

    # -- traces -------------------------------------------------------------
    def event(
        self, kind: str, source: str, name: str, value: float | None = None, detail: dict[str, Any] | None = None
    ) -> None:
        self.writer.append(
            "event", (time.time_ns(), kind, source, name, value, json.dumps(detail, sort_keys=True) if detail else None)
        )

    def flush_traces(self) -> None:
        """Write buffered rows from a thread so the gevent loop keeps running."""
        pool = gevent.get_hub().threadpool
        self.writer.flush(run_in=pool.apply)

    def _flush_loop(self) -> None:
        while not self.stopping.wait(FLUSH_EVERY_S):
            try:
                self.flush_traces()
            except Exception:
                log.exception("trace flush failed")

    # -- broker control -----------------------------------------------------
    def control(self):
        """The process's control channel (topology, depth checks, slot claims, census)."""
        with self._control_lock:
            if self._control is None or not self._control.is_open:
                conn = self._connect_direct(f"sojourn-control-{self.worker}")
                self._control_conn = conn
                self._control = amqp.open_channel(conn)
            return self._control

    def connect(self, name: str, on_close=None):
        """A producer's or consumer's connection, open when this returns: through the network
        proxy when the scenario has one (same user and vhost; amqps still checks the broker's name)."""
        if self.netem is None:
            return self._connect_direct(name, on_close)
        b = self.scenario.broker
        return amqp.connect(
            self.netem.url,
            heartbeat_s=b.heartbeat_s,
            connect_timeout_s=b.connect_timeout_s,
            name=name,
            on_close=on_close,
            tls_server_hostname=self.netem.tls_server_hostname,
        )

    def connect_direct(self, name: str, on_close=None):
        """A connection straight to the broker, never through the network proxy (dead-letter capture)."""
        return self._connect_direct(name, on_close)

    def _connect_direct(self, name: str, on_close=None):
        """Straight to the broker: the control connection is never delayed or cut by the proxy,
        so topology, slot claims, drain depth checks and the census keep working in an outage."""
        b = self.scenario.broker
        return amqp.connect(
            b.url, heartbeat_s=b.heartbeat_s, connect_timeout_s=b.connect_timeout_s, name=name, on_close=on_close
        )

    def start_netem(self) -> None:
        """Start this process's network proxy when the scenario has a `network:` section."""
        from loadgen.netem import NetemProcess, resolve_timeline

        timeline = resolve_timeline(self.scenario)
        if timeline is None:
            return
        self.netem = NetemProcess.start(
            self.scenario.broker.url,
            timeline,
            t0_ns=None,  # started before the start barrier: fix_t0 tells it t0
            run_dir=self.run_dir,
            run_id=self.run_id,
            worker=f"netem-{self.worker}",
            listen_port=self.scenario.network.listen_port,
            seed=f"{self.run_id}/{self.worker}",
        )
        log.info("network proxy on 127.0.0.1:%d", self.netem.port)

    def new_channel(self):
        """A fresh channel on the control connection (closing it does not disturb others)."""
        with self._control_lock:
            self.control()
            return amqp.open_channel(self._control_conn)

    def declare_topology(self, purge: bool) -> int:
        """The scenario's exchanges, then its queue (purged when `purge` and purge_on_start), then the
        queue's bindings; every exchange used but not declared must exist. Returns the queue's depth.
        A refusal raises topology.TopologyError naming the object and saying what to do."""
        s = self.scenario
        q = s.queue
        with self._control_lock:
            for i, x in enumerate(s.exchanges):
                self._declare(
                    lambda ch, x=x: topology.declare_exchange(
                        ch,
                        x.name,
                        exchange_type=x.type,
                        durable=x.durable,
                        auto_delete=x.auto_delete,
                        arguments=x.arguments,
                    ),
                    "exchange",
                    x.name,
                    f"exchanges[{i}]",
                )
            for name, path in required_exchanges(s):
                if not self._exchange_exists(name):
                    raise topology.missing_exchange(name, f"{s.source_path}: {path}")
            depth = self._declare(
                lambda ch: topology.declare_queue(
                    ch, q.name, durable=q.durable, auto_delete=q.auto_delete, arguments=q.declare_arguments()
                ),
                "queue",
                q.name,
                "queue",
            )
            for i, b in enumerate(s.bindings):
                self._declare(
                    lambda ch, b=b: topology.bind_queue(ch, q.name, b.exchange, b.routing_key, b.arguments),
                    "binding",
                    b.exchange,
                    f"bindings[{i}]",
                )
            if purge and q.purge_on_start and depth:
                topology.purge_queue(self.control(), q.name)
                self.event("broker_depth", "runner", q.name, float(depth), {"purged": True})
                depth = 0
        return depth

    def _declare(self, operation, kind: str, name: str, yaml_path: str):
        """operation(control channel); a refusal becomes a TopologyError located in the scenario."""
        try:
            return operation(self.control())
        except BrokerOperationFailed as exc:
            raise topology.refused(exc, kind, name, f"{self.scenario.source_path}: {yaml_path}") from None

    def _exchange_exists(self, name: str) -> bool:
        channel = self.new_channel()  # a missing exchange closes the channel it was asked on
        try:
            return topology.exchange_exists(channel, name)
        finally:
            if channel.is_open:
                channel.close()

    def start_dead_letter_capture(self, purge: bool) -> None:
        """When the queue has a dead-letter exchange: declare the capture and consume it (docs/discards.md)."""
        if self.dead_letter_plan is None:
            return
        capture = DeadLetterCapture(self, self.dead_letter_plan)
        capture.declare(purge)
        capture.start()
        self.dead_letters = capture

    def stop_dead_letter_capture(self) -> None:
        """After the census: stop capturing and read what is still in the capture queue."""
        if self.dead_letters is not None:
            self.dead_letters.stop()

    def delete_queue(self) -> None:
        """queue.delete_on_end: remove the queue (and what the census counted in it), and the capture queue."""
        with self._control_lock:
            topology.delete_queue(self.control(), self.scenario.queue.name)
            if self.dead_letters is not None:
                topology.delete_queue(self.control(), self.dead_letters.plan.queue)
        self.event("queue_deleted", "runner", self.scenario.queue.name)

    def delete_exchanges(self) -> None:
        """exchanges[].delete_on_end: remove those exchanges (and their bindings) after the run."""
        for x in self.scenario.exchanges:
            if x.delete_on_end:
                with self._control_lock:
                    topology.delete_exchange(self.control(), x.name)
                self.event("exchange_deleted", "runner", x.name)

    def queue_depth(self) -> int | None:
        try:
            with self._control_lock:
                return topology.queue_depth(self.control(), self.scenario.queue.name)
        except Exception as exc:  # noqa: BLE001 - a failed probe must not kill the drain
            log.warning("queue depth check failed: %s", exc)
            with self._control_lock:
                self._control = None
            return None

    def _dead_letter_depth(self) -> int | None:
        """Dead-letters not yet read by the capture: 0 without one, or before the declaring process made it."""
        if self.dead_letter_plan is None:
            return 0
        try:
            channel = self.new_channel()  # a missing queue closes the channel it was asked on
            try:
                return topology.queue_depth(channel, self.dead_letter_plan.queue)
            finally:
                if channel.is_open:
                    channel.close()
        except BrokerOperationFailed as exc:
            if exc.reply_code == topology.NOT_FOUND:
                return 0
            log.warning("dead-letter queue depth check failed: %s", exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a failed probe must not kill the drain
            log.warning("dead-letter queue depth check failed: %s", exc)
            return None

    def claim_slot(self, kind: str, group: str, max_count: int) -> int:
        """A slot number unique across every process of the run.

        Slots are claimed with exclusive, auto-deleting marker queues on the
        control connection, so workers on other processes or hosts never get the
        same slot; a slot decides when its user is active on the timeline.
        """
        with self._control_lock:  # held across the broker round trip: users of this process claim in turn
            for i in range(max_count):
                key = (kind, group, i)
                if key in self._claimed:
                    continue
                name = slot_queue_name(self.scenario.queue.name, kind, group, i)
                channel = self.new_channel()
                try:
                    amqp.wait_for(
                        # wait_for calls it now, in this iteration
                        lambda cb: channel.queue_declare(name, exclusive=True, auto_delete=True, callback=cb),  # noqa: B023
                        f"queue.declare {name!r}",
                        10.0,
                        channel=channel,
                    )
                except BrokerOperationFailed as exc:
                    if exc.reply_code == 405:  # RESOURCE_LOCKED: another process holds it
                        continue
                    raise
                finally:
                    if channel.is_open:
                        channel.close()
                self._claimed.add(key)
                return i
        raise RuntimeError(f"no free {kind} slot in group {group!r} (max {max_count})")

    # -- drain --------------------------------------------------------------
    def start_drain_monitor(self) -> None:
        self._greenlets.append(gevent.spawn(self._drain_monitor))
        self._greenlets.append(gevent.spawn(self._lateness_watch))

    def _lateness_watch(self) -> None:
        """Say loudly, while it happens and at the end, when publishes leave late: the first window
        that slips at once, then at most once a minute (repeats.HeldBack), and the run's total."""
        repeats = HeldBack()
        while not self.stopping.wait(LATENESS_EVERY_S) and not self.drained.is_set():
            window = self.lateness.take_window()
            now_s = self.elapsed_s()
            line = repeats.line(
                Lateness.warning(window, f"in the last {LATENESS_EVERY_S:g} s at t={now_s:.0f}s"), now_s
            )
            if line:
                log.warning("%s", line)
        self.lateness.take_window()
        line = Lateness.warning(self.lateness.total, f"over the run in {self.worker}")
        if line:
            held = f"; {repeats.held:,} repeated warnings were held back" if repeats.held else ""
            log.warning("%s%s", line, held)

    def _drain_monitor(self) -> None:
        run = self.scenario.run
        self.sleep_until(run.duration_s, self.stopping)
        self.draining.set()
        self.event("drain_start", "runner", self.worker)
        deadline = run.duration_s + run.drain_timeout_s
        stable = 0
        reason = "timeout"
        while self.elapsed_s() < deadline and not self.stopping.is_set():
            idle = all(p.idle() for p in self.participants)
            depth = self.queue_depth() if idle else None
            if depth == 0:  # a late dead-letter must be read before the capture stops
                depth = self._dead_letter_depth()
            stable = stable + 1 if idle and depth == 0 else 0
            if stable >= DRAIN_STABLE_CHECKS:
                reason = "empty"
                break
            gevent.sleep(DRAIN_POLL_S)
        if self.stopping.is_set():
            reason = "interrupted"
        self.event("drain_end", "runner", self.worker, detail={"reason": reason})
        if reason == "timeout":
            log.warning(
                "drain timed out after %.0f s; what is left is counted as left in the broker", run.drain_timeout_s
            )
        self.drained.set()
        if not self.participants:  # everyone here had already left (e.g. a producer-only worker)
            self.finished.set()

    def participant_finished(self, participant: Participant) -> None:
        while participant in self.participants:
            self.participants.remove(participant)
        if not self.participants and self.drained.is_set():
            self.finished.set()

    # -- teardown -----------------------------------------------------------
    def close(self) -> None:
        self.stopping.set()
        for g in self._greenlets:
            g.kill(block=False)
        if self.netem is not None:
            self.netem.stop()  # it records its own statistics and flushes them before exiting
        if self.dead_letters is not None:
            self.dead_letters.close()
        try:
            if self._control is not None and self._control_conn.is_open:
                self._control_conn.close()
        except Exception:  # noqa: BLE001
            pass
        self.event("run_end", "runner", self.role)
        self.writer.close()
