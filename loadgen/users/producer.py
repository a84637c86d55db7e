"""Publishing: open-loop schedule -> publish -> confirm -> trace.

A producer runs its own publish loop against its arrival schedule (Locust
schedules users, not messages). The schedule never waits for the broker: when a
publish is late, its intended and actual send times both go into the trace, so
coordinated omission shows instead of hiding.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent
from gevent.event import Event

from loadgen.amqp.link import ProducerLink, message_properties, open_producer_link
from loadgen.replay.plan import ReplayItem, plan
from loadgen.replay.sources import plan_kwargs
from loadgen.rules.pacing import on_time
from loadgen.rules.schedule import ArrivalSchedule, rate_curve
from loadgen.run.clock import LOOP_TURN_S
from loadgen.run.runtime import Participant
from loadgen.trace.rows import (
    PUBLISH_BLOCKED_MS as BLOCKED_MS,
    PUBLISH_CONFIRM_NS as CONFIRM_NS,
    PUBLISH_MESSAGE_ID as MESSAGE_ID,
    PUBLISH_NS as PUBLISHED,
    PUBLISH_OUTCOME as OUTCOME,
    PUBLISH_ROUTING_KEY as ROUTING_KEY,
    PUBLISH_SIZE as SIZE,
    publish_row,
)

__all__ = ["Producer", "Report"]

log = logging.getLogger("sojourn")

# Report(request_type, name, response_time_ms, response_length, exception)
Report = Callable[[str, str, float, int, BaseException | None], None]

WRITE_BUFFER_LIMIT = 256 * 1024  # bytes queued in pika before the loop waits for the socket
CONFIRM_GRACE_S = 5.0  # how long to wait for outstanding confirms at the end
BLOCKED_POLL_S = 0.5  # while blocked, how often a waiting publish looks at `stopping`


OpenLink = Callable[..., ProducerLink]
"""open_link(name, *, on_close, on_channel_close, on_blocked, on_unblocked, on_return, on_confirm):
loadgen.amqp.link.open_producer_link's shape."""

REJOIN_AFTER_S = 1.0  # a link lost (connection or channel) is opened again this long after


class Producer(Participant):
    def __init__(
        self,
        ctx,
        group: str,
        slot: int,
        report: Report,
        open_link: OpenLink | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ):
        """`open_link`: the AMQP link (default: pika's over ctx.connect), a seam as `clock_ns` is."""
        super().__init__(ctx, group, slot, report, clock_ns)
        self._open_link: OpenLink = open_link or (lambda *a, **kw: open_producer_link(ctx.connect, *a, **kw))
        self._id_prefix = f"{ctx.run_id}:{self.name}:"
        self._exchange = ctx.scenario.producer(group).exchange  # a phase can not change it
        self._seq = 0
        self._entered = False
        self._link: ProducerLink | None = None  # open while joined
        self._leaving = False
        # Each link (connection and channel) is a generation: its callbacks carry it and are
        # ignored once another link replaced it, and its delivery tags count from 1 in a dict of
        # its own, given up (traced) when its channel or connection closes, so a tag of one
        # channel never settles a publish of another.
        self._generation = 0
        self._pending: dict[int, list] = {}  # the current generation's delivery tag -> publish row (confirms on)
        self._next_tag = 1
        self._window_open = Event()
        self._window_open.set()
        self._bodies: dict[int, bytes] = {}
        self._replay: Iterator[ReplayItem] | None = None  # this slot's remaining replay items (kept across a re-entry)
        self._unblocked = Event()  # cleared while the broker blocks the connection (connection.blocked)
        self._unblocked.set()
        self._blocked_since_s = self._unblocked_at_s = -1.0  # elapsed time of the last block / unblock
        self._returned: set[str] = set()  # ids of mandatory publishes the broker returned, until confirmed
        # A stream of its own, so a priority mix does not change the arrival times of a seed.
        self._priority_rng = self.stream("priority")

    # -- Participant --------------------------------------------------------
    def idle(self) -> bool:
        return not self._pending

    def prepare(self) -> None:
        base = self.ctx.scenario.producer(self.group)
        settings = base if base.replay is not None else self.ctx.scenario.at(0.0).producer(self.group)
        silent = base.replay is None and settings.rate == 0 and settings.bursts is None
        if self.slot < settings.count and not silent:
            self._join(settings)

    # -- main loop ----------------------------------------------------------
    def run(self) -> None:
        if self.ctx.scenario.producer(self.group).replay is not None:
            self._run_replay()
            return
        scenario = self.ctx.scenario
        duration = scenario.run.duration_s
        bounds = [*scenario.boundaries(), duration]
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
                silent = settings.rate == 0 and settings.bursts is None  # a profile is a tuple
                if self.slot >= settings.count or silent:
                    self._leave()
                    self.ctx.sleep_until(end, self.ctx.stopping)
                    continue
                self._join(settings)
                bursts = settings.bursts
                rate_at, next_change = rate_curve(
                    settings.rate,
                    None if bursts is None else (bursts.on_s, bursts.off_s, bursts.off_rate, bursts.start_s),
                )
                # Open loop: the schedule starts at the segment's start whatever the time now;
                # a late start (connecting) shows as lateness in the trace, not as missing messages.
                schedule = ArrivalSchedule(
                    settings.arrival,
                    rate_at,
                    self.rng,
                    start_s=max(start, resume_s),
                    end_s=end,
                    next_change_after=next_change,
                )
                phase = scenario.phase_at(start)
                self._send_all(settings, ((t, phase, None) for t in schedule))
        finally:
            self._leave()

    def _run_replay(self) -> None:
        """Publish this slot's share of the replay file at its times (docs/replay.md)."""
        scenario = self.ctx.scenario
        settings = scenario.producer(self.group)  # a phase can not change a replay group
        if self.slot >= settings.count:
            return
        if self._replay is None:  # re-entered after an error: carry on where it stopped
            trace = self.ctx.replay_traces[self.group]
            self._replay = plan(
                trace,
                slot=self.slot,
                count=settings.count,
                split=settings.replay.split,
                **plan_kwargs(scenario, settings),
            )
        try:
            self._join(settings)
            self._send_all(
                settings, ((item.intended_s, scenario.phase_at(item.intended_s), item) for item in self._replay)
            )
        finally:
            self._leave()

    def _send_all(self, settings, sends) -> None:
        """Publish each (intended_s, phase, replay item or None) at its time until the run stops."""
        ctx = self.ctx
        for intended_s, phase, item in on_time(
            sends,
            sleep_until=lambda t: ctx.sleep_until_precise(t, ctx.stopping),
            draining=ctx.draining.is_set,
            elapsed_s=ctx.elapsed_s,
            run_end_s=ctx.scenario.run.duration_s,
            yield_turn=lambda: gevent.sleep(LOOP_TURN_S),  # behind schedule: serve confirms, timers, users
        ):
            self._publish(settings, intended_s, phase, item)

    def _join(self, settings) -> None:
        if self._link is not None and self._link.is_open:
            return
        self._drop_link()  # a link whose channel the broker closed: its connection goes too
        self._leaving = False
        self._unblocked.set()
        self._generation += 1
        gen = self._generation
        self._give_up_pending("unconfirmed")  # nothing is left by now; never carried into a new generation
        self._pending = {}
        self._next_tag = 1

        def current(callback: Callable[..., None]) -> Callable[..., None]:
            """`callback`, for as long as this link is the producer's."""

            def call(*args: Any) -> None:
                if gen == self._generation:
                    callback(*args)

            return call

        self._link = self._open_link(
            f"sojourn-producer-{self.name}",
            on_close=current(self._on_connection_closed),
            on_channel_close=current(self._on_channel_closed),
            on_blocked=current(self._on_blocked),
            on_unblocked=current(self._on_unblocked),
            on_return=self._on_return if settings.mandatory else None,  # by message id: no tag to confuse
            on_confirm=current(self._on_confirm) if settings.confirms else None,
        )
        self.ctx.event("producer_join", self.name, self.name)

    def _drop_link(self) -> None:
        """Close the current link's connection (a channel the broker closed leaves it open) and
        forget the link: a new generation, so its callbacks (the close this causes) are ignored."""
        link, self._link = self._link, None
        if link is not None:
            self._give_up_pending("unconfirmed")  # its close already said so, but for a close not yet seen
            self._generation += 1
            link.close()

    def _leave(self) -> None:
        link = self._link
        if link is None:
            return
        deadline = time.monotonic() + CONFIRM_GRACE_S
        while self._pending and time.monotonic() < deadline and link.is_open:  # a dead channel confirms nothing
            gevent.sleep(0.01)
        # Still blocked: the broker has not read what is in the socket since the block began.
        self._give_up_pending("unconfirmed" if self._unblocked.is_set() else "blocked_timeout")
        self._leaving = True
        link.close()
        self._link = None
        self.ctx.event("producer_leave", self.name, self.name)

    # -- publishing ---------------------------------------------------------
    def _publish(self, settings, intended_s: float, phase: str, item: ReplayItem | None = None) -> None:
        blocked_ms = None
        if not self._unblocked.is_set():  # producer flow control: the broker blocked the connection
            blocked_ms = self._wait_unblocked(intended_s, settings.max_blocked_wait_s)
        elif intended_s < self._unblocked_at_s:  # due during the last block, sent after it: waited too
            blocked_ms = (self._unblocked_at_s - max(intended_s, self._blocked_since_s)) * 1000
        link = self._link  # None after a reconnect that failed: this publish fails too, and tries again
        while True:
            if link is not None and not link.is_open and link.connection_open:
                # The broker closed the channel (said and traced by _on_channel_closed), now or while
                # the window was full: close the connection, open a new link after the pause; this
                # publish then goes on it, late.
                link = self._rejoin_later(settings)
            if (
                link is None
                or not link.is_open  # a closed channel confirms nothing: its publishes were given up
                or not settings.confirms
                or len(self._pending) < settings.confirm_window
                or self.ctx.stopping.is_set()
            ):
                break
            link.send_now()  # the publishes whose confirms open the window go first
            self._window_open.clear()
            self._window_open.wait(1.0)
        while link is not None and link.write_buffered() > WRITE_BUFFER_LIMIT:
            gevent.sleep(0.0005)  # let the bytes leave before counting another publish
        seq = self._seq
        self._seq += 1
        message_id = f"{self._id_prefix}{seq}"
        intended_ns = self.ctx.t0_ns + int(intended_s * 1e9)
        headers = {}
        if item is None:
            size, routing_key, body = settings.size_bytes, settings.routing_key, None
            priority = None if settings.priority is None else self._draw_priority(settings.priority)
        else:
            size, priority, body = item.size_bytes, item.priority, item.payload
            recorded = settings.replay.routing == "recorded" and item.routing_key is not None
            routing_key = item.routing_key if recorded else settings.routing_key
            if item.headers:
                headers.update(item.headers)
            if item.processing_ms is not None:  # AMQP tables have no float: whole microseconds
                headers["sojourn-proc-us"] = round(item.processing_ms * 1000)
        if body is None:
            body = self._body(size)
        publish_ns = self._now_ns()
        props = message_properties(2 if settings.persistent else 1, message_id, publish_ns, priority, headers)
        row = publish_row(
            message_id,
            self.name,
            self.group,
            seq,
            phase,
            intended_ns,
            publish_ns,
            size,
            routing_key,
            settings.persistent,
            priority,
            None if item is None else item.index,
            None if item is None else item.loop,
            blocked_ms,
        )
        if blocked_ms is not None and not self._unblocked.is_set():  # waited max_blocked_wait_s in vain
            row[OUTCOME] = "blocked_timeout"
            self._trace(row)
            self.report(
                "publish",
                self._request_name(settings.exchange, routing_key),
                blocked_ms,
                len(body),
                RuntimeError("connection blocked by the broker longer than max_blocked_wait_s"),
            )
            return
        try:
            if link is None:
                raise ConnectionError("no connection to the broker: the last reconnect failed")
            link.publish(settings.exchange, routing_key, body, props, mandatory=settings.mandatory)
        except Exception as exc:  # noqa: BLE001 - connection gone: record and carry on
            row[OUTCOME] = "failed"
            self._trace(row)
            self.report("publish", self._request_name(settings.exchange, routing_key), 0.0, len(body), exc)
            self._rejoin_later(settings)
            return
        self.ctx.counters["published"] += 1
        if blocked_ms is None:  # a wait on a blocked connection is the broker's delay, not lateness
            self.ctx.lateness.note(publish_ns - intended_ns)
        if settings.confirms:
            self._pending[self._next_tag] = row
            self._next_tag += 1
        else:
            row[OUTCOME] = "sent"
            self._trace(row)
            self.report(
                "publish",
                self._request_name(settings.exchange, routing_key),
                (self._now_ns() - publish_ns) / 1e6,
                len(body),
                None,
            )

    def _on_confirm(self, acked: bool, delivery_tag: int, multiple: bool) -> None:
        """Runs in the hub: settle every publish the (possibly multiple) confirm covers."""
        now = self._now_ns()
        outcome = "confirmed" if acked else "nacked"
        tags = [delivery_tag] if not multiple else [t for t in self._pending if t <= delivery_tag]
        for tag in tags:
            row = self._pending.pop(tag, None)
            if row is None:
                continue
            row[CONFIRM_NS] = now
            returned = row[MESSAGE_ID] in self._returned  # basic.return comes before the same publish's confirm
            if returned:
                self._returned.discard(row[MESSAGE_ID])
            row[OUTCOME] = this = "returned" if returned else outcome
            self._trace(row)
            self.ctx.counters["confirmed"] += 1
            exc = None if this == "confirmed" else RuntimeError(f"publish {this} by the broker")
            self.report(
                "publish",
                self._request_name(self._exchange, row[ROUTING_KEY]),
                (now - row[PUBLISHED]) / 1e6,
                row[SIZE],
                exc,
            )
        self._window_open.set()

    def _on_return(self, message_id, reply_code: int, reply_text: str, exchange: str, routing_key: str) -> None:
        """Runs in the hub: a mandatory publish no queue took. Its confirm follows (outcome
        `returned`); the event is the evidence when confirms are off."""
        if message_id is None:
            return
        if self._pending:  # confirms on: its confirm is still to come
            self._returned.add(message_id)
        self.ctx.event(
            "publish_returned",
            self.name,
            message_id,
            detail={
                "reply_code": reply_code,
                "reply_text": reply_text,
                "exchange": exchange,
                "routing_key": routing_key,
            },
        )

    def _on_blocked(self, reason: str) -> None:
        self._unblocked.clear()
        self._blocked_since_s = self.ctx.elapsed_s()
        self.ctx.event("connection_blocked", self.name, self.name, detail={"reason": reason})
        log.warning("producer %s: the broker blocked its connection (%s)", self.name, reason)

    def _on_unblocked(self) -> None:
        self._unblocked.set()
        self._unblocked_at_s = self.ctx.elapsed_s()
        self.ctx.event("connection_unblocked", self.name, self.name)

    def _wait_unblocked(self, intended_s: float, max_wait_s: float | None) -> float:
        """Wait for connection.unblocked; return how long this message has waited on the block, in ms.

        A message waits from its intended send time (or the start of the block, if later), as if
        each had its own sender: one due 3 s ago on a connection blocked since then has waited
        3 s already, and with `max_wait_s` 2 is given up at once instead of after 2 s more. The
        caller gives the publish up when the connection is still blocked on return."""
        since = max(intended_s, self._blocked_since_s)
        while not self._unblocked.is_set() and not self.ctx.stopping.is_set():
            left = BLOCKED_POLL_S if max_wait_s is None else since + max_wait_s - self.ctx.elapsed_s()
            if left <= 0:
                break
            self._unblocked.wait(min(left, BLOCKED_POLL_S))
        return max(0.0, self.ctx.elapsed_s() - since) * 1000

    def _draw_priority(self, mix) -> int:
        x = self._priority_rng.random()
        for priority, share in mix:
            x -= share
            if x < 0:
                return priority
        return mix[-1][0]  # rounding: the shares sum to 1 within a few ulps

    def _on_connection_closed(self, exc) -> None:
        if not self._leaving:
            self.ctx.event("connection_lost", self.name, self.name, detail={"reason": str(exc)})
            log.warning("producer %s lost its connection: %s", self.name, exc)
        self._give_up_pending("unconfirmed")
        self._window_open.set()
        self._unblocked.set()  # a blocked connection that closed blocks no one any more

    def _on_channel_closed(self, reply_code: int, reply_text: str) -> None:
        """Runs in the hub: the broker closed the channel, the connection still open (a publish to
        an exchange that is gone: 404; a 406). Every publish it had not confirmed is traced
        `channel_closed` (the broker routed those before the faulty one, and dropped the rest);
        the confirm window opens; the next publish reopens the link (_rejoin_later)."""
        if self._leaving:
            return
        unconfirmed = len(self._pending)
        self.ctx.event(
            "channel_closed",
            self.name,
            self.name,
            float(reply_code),
            detail={"reply_code": reply_code, "reply_text": reply_text, "unconfirmed": unconfirmed},
        )
        log.warning(
            "producer %s: the broker closed its channel (%s %s); %d unconfirmed publishes traced channel_closed; "
            "reopening in %g s",
            self.name,
            reply_code,
            reply_text,
            unconfirmed,
            REJOIN_AFTER_S,
        )
        self._give_up_pending("channel_closed")
        self._window_open.set()

    def _give_up_pending(self, outcome: str) -> None:
        now_ns = self._now_ns()
        block_ns = self.ctx.t0_ns + int(self._blocked_since_s * 1e9)
        for row in self._pending.values():
            row[OUTCOME] = outcome
            if outcome == "blocked_timeout":  # stuck behind the block since it began, or since sent
                row[BLOCKED_MS] = (now_ns - max(row[PUBLISHED], block_ns)) / 1e6
            self._trace(row)
        self._pending.clear()

    def _rejoin_later(self, settings) -> ProducerLink | None:
        """Close the lost link (its connection, when still open), and after REJOIN_AFTER_S join
        again; the new link, or None when that failed (the next publish fails and tries again)."""
        self._drop_link()
        if self.ctx.sleep_until(self.ctx.elapsed_s() + REJOIN_AFTER_S, self.ctx.stopping):
            try:
                self._join(settings)
            except Exception as exc:  # noqa: BLE001
                log.warning("producer %s could not reconnect: %s", self.name, exc)
        return self._link

    # -- helpers ------------------------------------------------------------
    def _trace(self, row: list) -> None:
        self.ctx.writer.append("publish", tuple(row))

    def _body(self, size: int) -> bytes:
        body = self._bodies.get(size)
        if body is None:
            body = self._bodies[size] = b"x" * size
        return body

    @staticmethod
    @functools.lru_cache(maxsize=1024)  # a few names per run: built once, not per publish
    def _request_name(exchange: str, routing_key: str) -> str:
        return f"publish:{exchange or '(default)'}:{routing_key}"
