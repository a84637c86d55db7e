"""Per-process run state: the clock, the trace writer, the control connection and the drain
(each concern in its own module of loadgen/run, RunContext composes them).

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

from loadgen.replay.sources import load_sources
from loadgen.rules.lateness import Lateness
from loadgen.rules.schedule import producer_rng
from loadgen.run import guarded
from loadgen.run.broker_side import BrokerSide
from loadgen.run.clock import RunClock
from loadgen.run.deadletter import DeadLetterCapture, capture_plan
from loadgen.run.drain import Drain
from loadgen.trace import TraceWriter

if TYPE_CHECKING:
    from loadgen.netem import NetemProcess

__all__ = ["RunContext", "Participant", "worker_name", "freeze_heap"]

log = logging.getLogger("sojourn")

FLUSH_EVERY_S = 1.0


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

    def __init__(self, ctx: RunContext, group: str, slot: int, report, clock_ns: Callable[[], int] = time.time_ns):
        """`clock_ns`: the wall clock every stamp is read from (a seam for tests, as each
        participant's AMQP link is)."""
        self.ctx = ctx
        self._now_ns = clock_ns
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

    def last_receive_ns(self) -> int | None:
        """When a consumer last received a delivery (None: never, or not a consumer)."""
        return None

    def held(self) -> tuple[int, int] | None:
        """A consumer's deliveries waiting in its buffer, and all it holds unsettled (None: not a consumer)."""
        return None

    def prepare(self) -> None:
        """Before t0: connect (and subscribe) as the settings at time 0 ask, so the run starts
        with everyone ready (loadgen.rules.barrier). Nothing to do for a slot idle at time 0."""


def _seed(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class RunContext(RunClock, BrokerSide, Drain):
    """The run in this process, by concern: its clock (run/clock.py), its broker side (control
    connection, topology, slots, the network proxy, dead-letter capture: run/broker_side.py), the
    drain (run/drain.py), and here the participants' readiness, the traces and the teardown."""

    def __init__(
        self, scenario, run_dir: str, run_id: str, role: str, t0_ns: int | None = None, metrics_fd: int | None = None
    ):
        """`metrics_fd`: a listening socket to serve the run's live metrics on (loadgen.metrics)."""
        self.scenario = scenario
        self.run_dir = run_dir
        self.run_id = run_id
        self.role = role  # local | master | worker
        self.worker = worker_name()
        # Provisional until the start barrier fixes it (fix_t0): nothing runs on the clock before.
        self.set_t0(t0_ns or time.time_ns())
        self.started = Event()  # t0 is fixed: schedules, warm-up and samplers count from it
        self._ready: set[Participant] = set()  # participants ready to start (prepared)
        self.on_ready: Callable[[int], None] = lambda _count: None  # told each time one more is ready
        self.writer = TraceWriter(
            run_dir,
            run_id,
            self.worker,
            offload=lambda fn: gevent.get_hub().threadpool.spawn(fn),
            metrics_fd=metrics_fd,
        )
        self.draining = Event()  # publishing must stop
        self.drained = Event()  # consumers may leave
        self.finished = Event()  # every local participant has left
        self.stopping = Event()  # the run is being torn down (normal end or interrupt)
        self.participants: list[Participant] = []
        self.counters = {"published": 0, "confirmed": 0, "delivered": 0, "acked": 0}
        self.lateness = Lateness()  # publish lateness, for the console's "fell behind" warning
        self._claimed: set[tuple[str, str, int]] = set()
        self._created: set[tuple[str, str]] = set()  # what this run declared into existence (broker_side)
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
        self._greenlets.append(guarded.spawn("trace_flush", self._flush_loop))

    # -- time ---------------------------------------------------------------
    def fix_t0(self, t0_ns: int, detail: dict[str, Any]) -> None:
        """The start barrier's t0 (loadgen.rules.barrier): the clock, this process's network proxy and
        everyone waiting in ready_to_start count from it; a `start_barrier` event records it."""
        self.set_t0(t0_ns)
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
                if self.writer.serves_metrics:
                    gevent.get_hub().threadpool.apply(self.writer.send_live, (self.live_state(),))
            except Exception:
                log.exception("trace flush failed")

    def live_state(self) -> dict[str, Any]:
        """What the live metrics take from this process rather than from the rows: the run's phase
        (starting, the timeline's, drain, ended), the seconds since t0, and each consumer's buffer
        and unsettled deliveries (loadgen.metrics.live.LiveMetrics.set_live)."""
        duration_s = self.scenario.run.duration_s
        elapsed = self.elapsed_s() if self.started.is_set() else None
        if elapsed is None:
            phase = "starting"
        elif self.stopping.is_set() or self.finished.is_set():
            phase = "ended"
        elif elapsed >= duration_s:
            phase = "drain"
        else:
            phase = self.scenario.phase_at(max(elapsed, 0.0))
        consumers = [[p.name, p.group, *held] for p in self.participants if (held := p.held()) is not None]
        return {"phase": phase, "elapsed_s": elapsed, "consumers": consumers}

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
        self.close_control()
        self.event("run_end", "runner", self.role)
        self.writer.close()
