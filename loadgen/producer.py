"""Publishing: open-loop schedule -> publish -> confirm -> trace.

A producer runs its own publish loop against its arrival schedule (Locust
schedules users, not messages). The schedule never waits for the broker: when a
publish is late, its intended and actual send times both go into the trace, so
coordinated omission shows instead of hiding.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import gevent
import pika
from gevent.event import Event

from loadgen.amqp import connection as amqp
from loadgen.runtime import Participant
from loadgen.schedule import ArrivalSchedule

__all__ = ["Producer", "Report"]

log = logging.getLogger("sojourn")

# Report(request_type, name, response_time_ms, response_length, exception)
Report = Callable[[str, str, float, int, BaseException | None], None]

WRITE_BUFFER_LIMIT = 256 * 1024  # bytes queued in pika before the loop waits for the socket
CONFIRM_GRACE_S = 5.0            # how long to wait for outstanding confirms at the end
LATE_YIELD_EVERY = 64            # publishes in a row behind schedule before yielding to the hub


class Producer(Participant):
    def __init__(self, ctx, group: str, slot: int, report: Report):
        super().__init__(ctx, group, slot, report)
        self._seq = 0
        self._entered = False
        self._conn = None
        self._channel = None
        self._leaving = False
        self._pending: dict[int, list] = {}   # delivery tag -> publish row (confirms on)
        self._next_tag = 1
        self._window_open = Event()
        self._window_open.set()
        self._bodies: dict[int, bytes] = {}

    # -- Participant --------------------------------------------------------
    def idle(self) -> bool:
        return not self._pending

    # -- main loop ----------------------------------------------------------
    def run(self) -> None:
        scenario = self.ctx.scenario
        duration = scenario.run.duration_s
        bounds = [0.0, *scenario.change_times(), duration]
        # Re-entered after an error: resume from now rather than bursting to catch up.
        resume_s = self.ctx.elapsed_s() if self._entered else 0.0
        self._entered = True
        try:
            for start, end in zip(bounds, bounds[1:]):
                if self.ctx.draining.is_set() or self.ctx.stopping.is_set():
                    break
                if self.ctx.elapsed_s() >= end:
                    continue
                settings = scenario.at(start).producer(self.group)
                if self.slot >= settings.count or settings.rate <= 0:
                    self._leave()
                    self.ctx.sleep_until(end, self.ctx.stopping)
                    continue
                self._join(settings)
                # Open loop: the schedule starts at the segment's start whatever the time now;
                # a late start (connecting) shows as lateness in the trace, not as missing messages.
                schedule = ArrivalSchedule(settings.arrival, lambda _t, r=settings.rate: r, self.rng,
                                           start_s=max(start, resume_s), end_s=end)
                phase = scenario.phase_at(start)
                late_streak = 0
                for intended_s in schedule:
                    if not self.ctx.sleep_until(intended_s, self.ctx.stopping) or self.ctx.draining.is_set():
                        break  # stopped, or the run is over: a late schedule is not published after it
                    self._publish(settings, intended_s, phase)
                    late_streak = late_streak + 1 if intended_s <= self.ctx.elapsed_s() else 0
                    if late_streak >= LATE_YIELD_EVERY:
                        late_streak = 0
                        gevent.sleep(0)  # behind schedule: let the hub serve confirms, timers, other users
        finally:
            self._leave()

    def _join(self, settings) -> None:
        if self._channel is not None and self._channel.is_open:
            return
        self._leaving = False
        self._conn = self.ctx.connect(f"sojourn-producer-{self.name}", on_close=self._on_connection_closed)
        self._channel = amqp.open_channel(self._conn)
        self._next_tag = 1
        if settings.confirms:
            amqp.wait_for(lambda cb: self._channel.confirm_delivery(self._on_confirm, callback=cb),
                          "confirm.select", channel=self._channel)
        self.ctx.event("producer_join", self.name, self.name)

    def _leave(self) -> None:
        if self._channel is None:
            return
        deadline = time.monotonic() + CONFIRM_GRACE_S
        while self._pending and time.monotonic() < deadline and self._conn.is_open:
            gevent.sleep(0.01)
        self._give_up_pending("unconfirmed")
        self._leaving = True
        try:
            if self._conn.is_open:
                self._conn.close()
        except Exception:  # noqa: BLE001
            pass
        self._channel = None
        self.ctx.event("producer_leave", self.name, self.name)

    # -- publishing ---------------------------------------------------------
    def _publish(self, settings, intended_s: float, phase: str) -> None:
        while settings.confirms and len(self._pending) >= settings.confirm_window \
                and not self.ctx.stopping.is_set():
            self._window_open.clear()
            self._window_open.wait(1.0)
        transport = getattr(self._conn, "_transport", None)
        while transport is not None and transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            gevent.sleep(0.0005)  # let the bytes leave before counting another publish
        seq = self._seq
        self._seq += 1
        message_id = f"{self.ctx.run_id}:{self.name}:{seq}"
        body = self._body(settings.size_bytes)
        intended_ns = self.ctx.t0_ns + int(intended_s * 1e9)
        publish_ns = time.time_ns()
        props = pika.BasicProperties(
            delivery_mode=2 if settings.persistent else 1, message_id=message_id,
            headers={"sojourn-id": message_id, "sojourn-pub-ns": publish_ns})
        row = [message_id, self.name, self.group, seq, phase, intended_ns, publish_ns,
               settings.size_bytes, settings.routing_key, settings.persistent, None, None, None, None, None]
        try:
            self._channel.basic_publish(settings.exchange, settings.routing_key, body, props)
        except Exception as exc:  # noqa: BLE001 - connection gone: record and carry on
            row[11] = "failed"
            self._trace(row)
            self.report("publish", self._request_name(settings), 0.0, len(body), exc)
            self._reconnect_later(settings)
            return
        self.ctx.counters["published"] += 1
        if settings.confirms:
            self._pending[self._next_tag] = row
            self._next_tag += 1
        else:
            row[11] = "sent"
            self._trace(row)
            self.report("publish", self._request_name(settings), (time.time_ns() - publish_ns) / 1e6,
                        len(body), None)

    def _on_confirm(self, frame) -> None:
        """Runs in the hub: settle every publish the (possibly multiple) confirm covers."""
        now = time.time_ns()
        method = frame.method
        outcome = "confirmed" if isinstance(method, pika.spec.Basic.Ack) else "nacked"
        tags = [method.delivery_tag] if not method.multiple else \
            [t for t in self._pending if t <= method.delivery_tag]
        for tag in tags:
            row = self._pending.pop(tag, None)
            if row is None:
                continue
            row[10] = now
            row[11] = outcome
            self._trace(row)
            self.ctx.counters["confirmed"] += 1
            exc = None if outcome == "confirmed" else RuntimeError("publish nacked by the broker")
            self.report("publish", f"publish:{self._route(row)}", (now - row[6]) / 1e6, row[7], exc)
        self._window_open.set()

    def _on_connection_closed(self, _conn, exc) -> None:
        if not self._leaving:
            self.ctx.event("connection_lost", self.name, self.name, detail={"reason": str(exc)})
            log.warning("producer %s lost its connection: %s", self.name, exc)
        self._give_up_pending("unconfirmed")
        self._window_open.set()

    def _give_up_pending(self, outcome: str) -> None:
        for row in self._pending.values():
            row[11] = outcome
            self._trace(row)
        self._pending.clear()

    def _reconnect_later(self, settings) -> None:
        self._channel = None
        if self.ctx.sleep_until(self.ctx.elapsed_s() + 1.0, self.ctx.stopping):
            try:
                self._join(settings)
            except Exception as exc:  # noqa: BLE001
                log.warning("producer %s could not reconnect: %s", self.name, exc)

    # -- helpers ------------------------------------------------------------
    def _trace(self, row: list) -> None:
        self.ctx.writer.append("publish", tuple(row))

    def _body(self, size: int) -> bytes:
        body = self._bodies.get(size)
        if body is None:
            body = self._bodies[size] = b"x" * size
        return body

    def _route(self, row: list) -> str:
        return f"{self.ctx.scenario.producer(row[2]).exchange or '(default)'}:{row[8]}"

    @staticmethod
    def _request_name(settings) -> str:
        return f"publish:{settings.exchange or '(default)'}:{settings.routing_key}"

