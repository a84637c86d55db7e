"""Consuming: client-side buffer, simulated processing, ack; every delivery traced.

pika's gevent adapter runs `_on_message` in the hub as soon as a frame is read:
it only stamps the receive time (the kernel's arrival stamp of the bytes, where the platform
gives one: loadgen.amqp.kstamp; and the read time) and appends to the client buffer. Processing
runs in the consumer's own greenlet, in arrival order, sleeping cooperatively, so
the I/O loop keeps reading deliveries and sending acks meanwhile and a consumer
with prefetch N really holds up to N deliveries in its buffer. A delivery with nothing to wait
for (no processing time, CoDel or egress) that reaches an idle consumer with an empty buffer is
settled in the hub as it arrives instead, as a plain pika callback would: there is nothing to
simulate, and waking the greenlet for it cost a third more CPU per message (docs/benchmarks.md).
The consumer talks to AMQP only through its link (loadgen.amqp.link: set the prefetch, consume,
cancel, ack, nack, the receive stamp, close, crash): pika's in a run, an in-memory fake in the unit
tests (tests/unit/test_consumer.py).

With `codel` set on the group, a CoDel controller (loadgen.rules.codel) decides as each
delivery leaves the buffer whether to nack it instead of processing it
(docs/codel.md). With `egress` set, the buffer is split into priority classes that
discard their oldest deliveries when full (loadgen.rules.egress, docs/discards.md): the
hub acks each discarded delivery as it admits the new one.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import gevent
from gevent.event import Event

from loadgen.amqp.link import ConsumerLink, open_consumer_link
from loadgen.amqp.topology import NOT_FOUND
from loadgen.errors import BrokerOperationFailed
from loadgen.rules.codel import CoDel
from loadgen.rules.egress import EgressBuffer
from loadgen.rules.outcomes import OutcomeDraws
from loadgen.rules.schedule import producer_rng
from loadgen.rules.stream_position import StreamPosition
from loadgen.run.runtime import Participant
from loadgen.scenario.streams import consume_offset
from loadgen.users.handler import Handler, Message, Result
from loadgen.users.producer import Report

__all__ = ["Consumer"]

log = logging.getLogger("sojourn")

CLOSE_WAIT_S = 5.0
LANES_WAIT_S = 30.0  # a leave waits this long at most for a handler's calls in flight
OVERSHOOT_WEIGHT = 0.05  # the newest sleep's weight in the running mean of timer lateness (_simulate)


class Delivery(NamedTuple):
    receive_ns: int
    tag: int
    redelivered: bool
    message_id: str | None
    publish_ns: int | None
    size: int
    prefetch: int
    buffer_len: int
    phase: str
    link: ConsumerLink  # the link it came on: settled there only while that link is open
    recorded_us: int | None  # the `sojourn-proc-us` header of a replayed message
    priority: int | None  # the AMQP priority property
    read_ns: int  # when the callback ran (receive_ns is the kernel's stamp where there is one)
    raw: tuple | None = None  # a handler's group: (body, properties, routing key, exchange)
    stream_offset: int | None = None  # on a stream: the message's offset (the x-stream-offset header)


def header_int(value) -> int | None:
    """A header's integer as a plain int (None when it is not an integer: a foreign message's).
    pika reads a 64-bit header integer as its own `long`, an int subclass that `marshal` refuses:
    every batch of delivery rows then fell back to pickle, about twice the cost in the I/O loop
    and in the trace writer's child."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


_NO_EGRESS = (None, None, None, None)  # egress_class, egress_length, egress_units, discard_indication
_NO_CODEL = (None, None, None, None)  # codel_dropping, codel_count, codel_first_above_ns, codel_drop_next_ns


def delivery_row(
    d: Delivery,
    consumer: str,
    group: str,
    start_ns: int | None,
    end_ns: int | None,
    settle_ns: int | None,
    outcome: str,
    processing_ms: float | None,
    codel_state: tuple | None,
    egress: tuple,
    settled_by: str | None = None,
    handler_error: str | None = None,
) -> tuple:
    """A delivery trace row (loadgen.trace.rows: the schema's own columns, in order; pinned by
    name in tests/unit/test_trace_rows.py)."""
    return (
        d.message_id,
        consumer,
        group,
        d.phase,
        d.tag,
        d.redelivered,
        d.publish_ns,
        d.receive_ns,
        start_ns,
        end_ns,
        settle_ns,
        outcome,
        d.prefetch,
        d.buffer_len,
        d.size,
        processing_ms,
        *(codel_state if codel_state is not None else _NO_CODEL),
        d.priority,
        *egress,
        d.read_ns,
        settled_by,
        handler_error,
        d.stream_offset,
    )


def settle(link: ConsumerLink, tag: int, outcome: str) -> None:
    """Settle a delivery other than by an ack: `nack_requeue`, `nack_discard` or `reject` (a frame
    the I/O loop writes; nothing waits)."""
    if outcome == "reject":
        link.reject(tag, requeue=False)
    else:
        link.nack(tag, multiple=False, requeue=outcome == "nack_requeue")


OpenLink = Callable[..., ConsumerLink]
"""open_link(name, on_close, on_message, on_crossed, *, on_channel_close, on_cancel):
loadgen.amqp.link.open_consumer_link's shape."""


class Consumer(Participant):
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
        self._open_link: OpenLink = open_link or (lambda *a, **kw: open_consumer_link(ctx.connect, *a, **kw))
        base = ctx.scenario.consumer(group)
        spec = base.egress
        # With egress the buffer is an EgressBuffer: len(), truth and popleft() work as on the deque.
        self._egress: EgressBuffer[Delivery] | None = (
            EgressBuffer(spec.classes, spec.max_depth_units, spec.min_burst) if spec is not None else None
        )
        self._buffer: deque[Delivery] | EgressBuffer[Delivery] = self._egress if self._egress is not None else deque()
        self._auto_ack = base.ack_mode == "auto"  # not phase-settable
        self._discard_name = f"egress_discard:{ctx.scenario.queue.name}"
        self._has_work = Event()
        self._busy = 0  # deliveries in hand (processing): a handler's lanes may hold several
        self._link: ConsumerLink | None = None  # subscribed while joined
        # The broker's fault on the current link, if any: ("channel_closed" | "cancelled", detail).
        # The consumer's greenlet then leaves that link and joins again (_rejoin).
        self._fault: tuple[str, dict] | None = None
        self._prefetch = 0
        self._crossed = 0  # deliveries that crossed a basic.cancel since the last event said so
        self._leaving = False
        self._overshoot_s = 0.0  # running mean of how late gevent's timer wakes us
        self._overshoot_n = 0  # sleeps it has seen (a plain mean until OVERSHOOT_WEIGHT takes over)
        self._request_name = f"consume:{ctx.scenario.queue.name}"
        self._nack_name = f"nack:{ctx.scenario.queue.name}"
        # Settings under which a delivery arriving to an idle consumer is settled in the hub as it
        # arrives (no processing time, CoDel or egress: see _on_message), and until when they hold.
        self._inline_settings = None
        self._inline_until = float("-inf")
        self._codel: CoDel | None = None  # one controller per consumer instance, kept across phases
        self._codel_spec = None
        spec = base.handler  # not phase-settable
        self._handler = Handler(spec, self.name) if spec is not None else None
        self._lanes = spec.concurrency if spec is not None else 1  # deliveries processed at once
        # A thread handler runs in lane greenlets even one at a time: the consumer's own greenlet never
        # waits on a call, so a handler that hangs can not keep it from leaving (_wait_for_lanes).
        self._in_lanes = spec is not None and spec.mode == "thread"
        # Single active consumer: the broker delivers to one consumer at a time; each consumer says
        # when its first delivery after a join came (consumer_active) and when its last one did.
        self._single_active = ctx.scenario.queue.single_active_consumer
        self._awaiting_active = False
        self._last_receive_ns: int | None = None
        # A stream: every consumer reads the whole log from where it attaches, the first time at its
        # group's `offset`, then where it left off (loadgen.rules.stream_position).
        self._stream = ctx.scenario.queue.stream
        self._position = StreamPosition()
        self._wanted = False  # its slot is in its group's count now: it should be subscribed
        self._reads_from: str | int = "next"
        self._said_stream_ack = False
        # The outcome rates' draws: one seeded stream per consumer for the whole run, made on the first draw.
        self._outcomes = OutcomeDraws(
            lambda seed: self.stream("outcomes") if seed is None else producer_rng(seed, f"{self.name}/outcomes")
        )

    # -- Participant --------------------------------------------------------
    def idle(self) -> bool:
        if self._stream and self._wanted and (self._link is None or self._fault is not None):
            return False  # away from a stream it reads (rejoining): only it knows what it has not read
        return not self._buffer and not self._busy

    def last_receive_ns(self) -> int | None:
        return self._last_receive_ns

    def buffered(self) -> int:
        return len(self._buffer)

    def held(self) -> tuple[int, int]:
        buffered = len(self._buffer)
        return buffered, buffered + self._busy

    def prepare(self) -> None:
        settings = self.ctx.scenario.settings_at(0.0).consumer(self.group)
        if self.slot < settings.count:
            self._join(settings)

    # -- main loop ----------------------------------------------------------
    def run(self) -> None:
        ctx, scenario = self.ctx, self.ctx.scenario
        changes = scenario.boundaries()
        settings: Any  # set on the first pass: valid_until starts at -inf
        settings, valid_until = None, float("-inf")  # the settings hold until the next phase change
        clean = False
        try:
            while not ctx.drained.is_set() and not ctx.stopping.is_set():
                t = ctx.elapsed_s()
                if t >= valid_until:  # looked up once per phase, not once per delivery
                    settings = scenario.settings_at(t).consumer(self.group)
                    valid_until = next((c for c in changes if c > t), float("inf"))
                    self._inline_settings = settings if self._settles_on_arrival(settings) else None
                    self._inline_until = valid_until
                self._wanted = self.slot < settings.count
                if not self._wanted:
                    if self._link is not None and settings.leave == "crash":
                        self._crash(settings)
                    elif self._link is not None:
                        self._leave(clean=True)
                    self._wait_for_change(t)
                    continue
                if self._fault is not None:
                    self._rejoin(settings)
                if self._link is None:
                    self._join(settings)
                elif settings.prefetch != self._prefetch:
                    self._change_prefetch(settings)
                if self._buffer and self._busy < self._lanes:
                    self._process_one(settings)
                else:
                    if self._codel is not None and not self._buffer:
                        self._codel.on_empty(self._now_ns())
                    if self._link is not None:
                        self._link.send_now()  # the acks go before this greenlet waits
                    self._has_work.clear()
                    self._has_work.wait(0.05)
            clean = not ctx.stopping.is_set()
        finally:  # a subscription the broker cancelled is not cancelled again (no cancel-ok would come)
            try:
                self._leave(clean=clean, subscribed=self._fault is None or self._fault[0] != "cancelled")
            finally:
                if self._handler is not None and not self._busy:  # a hung call's thread dies with the process
                    self._handler.close()

    def _wait_for_change(self, t: float) -> None:
        upcoming = [c for c in self.ctx.scenario.boundaries() if c > t]
        until = upcoming[0] if upcoming else self.ctx.scenario.run.duration_s + 1e6
        self.ctx.sleep_until(until, self.ctx.drained)

    # -- connection ---------------------------------------------------------
    def _join(self, settings) -> None:
        """Connect and subscribe. A queue that is gone (404 on basic.consume: deleted during the
        run) is declared again, once, as the run declared it (RunContext.declare_topology), with a
        `queue_recreated` event: what the broker lost with it counts as lost_with_queue."""
        try:
            self._subscribe(settings)
        except BrokerOperationFailed as exc:
            if exc.reply_code != NOT_FOUND:
                raise
            self._drop_link()
            self._recreate_queue(exc)
            self._subscribe(settings)
        assert self._link is not None
        self._awaiting_active = self._single_active
        self.ctx.event(
            "consumer_join",
            self.name,
            self.name,
            detail={
                "prefetch": settings.prefetch,
                "ack_mode": settings.ack_mode,
                "receive_stamp": self._link.receive_stamp,
                **({"stream_offset": self._reads_from} if self._stream else {}),
            },
        )

    def _subscribe(self, settings) -> None:
        self._leaving = False
        self._fault = None
        self._link = self._open_link(
            f"sojourn-consumer-{self.name}",
            self._on_connection_closed,
            self._on_message,
            self._on_crossed_cancel,
            on_channel_close=self._on_channel_closed,
            on_cancel=self._on_cancelled,
            **({"with_message": True} if self._handler is not None else {}),
        )
        self._set_prefetch(settings)
        self._consume(settings, wait=True)  # a queue that is gone raises here (404)

    def _drop_link(self) -> None:
        """Close the current link (its connection too) without a word: a link that failed to join."""
        link, self._link = self._link, None
        if link is not None:
            self._leaving = True
            link.close(CLOSE_WAIT_S)
            self._leaving = False

    def _recreate_queue(self, exc: BrokerOperationFailed) -> None:
        name = self.ctx.scenario.queue.name
        self._position.start_over()  # a stream declared again starts its offsets over
        log.warning("consumer %s: queue %r is gone (%s); declaring it again", self.name, name, exc)
        depth = self.ctx.declare_topology(purge=False)
        self.ctx.event(
            "queue_recreated",
            self.name,
            name,
            float(depth),
            detail={"reply_code": exc.reply_code, "reply_text": exc.reply_text},
        )

    def _rejoin(self, settings) -> None:
        """The broker closed this consumer's channel, or cancelled its subscription: leave that link
        (a cancelled one first processes and acks what it holds, on the channel still open; a
        closed one's buffer is already traced unsettled, requeued by the broker, or on a stream read
        again by the next subscription) and close its
        connection. The loop then joins again at once, as after a lost connection."""
        fault = self._fault
        assert fault is not None
        self._leave(clean=fault[0] == "cancelled", subscribed=False, reason=fault[0])
        if fault[0] == "cancelled":  # the broker cancels when the queue is deleted: a stream starts over
            self._position.start_over()
        self._fault = None

    def _consume(self, settings, wait: bool = False) -> None:
        assert self._link is not None
        self._link.consume(
            self.ctx.scenario.queue.name,
            auto_ack=settings.ack_mode == "auto",
            wait=wait,
            arguments=self._stream_arguments(settings) if self._stream else None,
        )

    def _stream_arguments(self, settings) -> dict[str, Any] | None:
        """A stream's x-stream-offset (loadgen.rules.stream_position); `_reads_from` keeps it as the
        consumer_join event says it."""
        self._reads_from = self._position.reads_from(settings.offset, self._now_ns())
        return {"x-stream-offset": consume_offset(self._reads_from)}

    def _change_prefetch(self, settings) -> None:
        """A phase changed the prefetch of a live consumer.

        RabbitMQ applies a per-consumer basic.qos (global=false) only to consumers
        started after it, so the consumer re-subscribes: cancel, then consume again.
        Deliveries already buffered stay unacked and are acked as usual on the same
        channel; until they are, more than the new limit may be outstanding for a
        moment (as the broker documents for any prefetch change in flight).
        """
        old = self._prefetch
        self._set_prefetch(settings)
        if settings.prefetch_scope == "consumer" and self._link is not None:
            self._link.cancel(CLOSE_WAIT_S)
            self._consume(settings)
        self.ctx.event(
            "prefetch_change",
            self.name,
            self.name,
            float(settings.prefetch),
            detail={"from": old, "to": settings.prefetch, "crossed_cancel": self._take_crossed()},
        )

    def _set_prefetch(self, settings) -> None:
        assert self._link is not None
        self._link.set_prefetch(settings.prefetch, global_qos=settings.prefetch_scope == "channel")
        self._prefetch = settings.prefetch

    def _leave(self, clean: bool, subscribed: bool = True, reason: str | None = None) -> None:
        """Stop consuming. Clean: cancel (unless the broker did: not `subscribed`), then process and
        ack what is buffered. Otherwise (interrupt, or a channel the broker closed): buffered
        deliveries are traced unsettled; the broker requeues them. `reason`: why, when not the
        consumer's own choice (the broker's channel_closed or cancelled), for the leave event."""
        link = self._link
        if link is None:
            self._trace_unsettled_buffer()
            return
        self._leaving = True
        if clean and link.is_open:
            try:
                if subscribed:
                    link.cancel(CLOSE_WAIT_S)
                settings = self.ctx.scenario.settings_at(self.ctx.elapsed_s()).consumer(self.group)
                while self._buffer and link.is_open:
                    if self._busy < self._lanes:
                        self._process_one(settings)
                    else:  # a handler's lanes are all busy: wait for one to settle
                        self._has_work.clear()
                        self._has_work.wait(0.05)
                self._wait_for_lanes(link)
            except Exception as exc:  # noqa: BLE001
                log.warning("consumer %s: clean leave failed: %s", self.name, exc)
        self._trace_unsettled_buffer()
        link.close(CLOSE_WAIT_S)
        self._link = None
        detail: dict[str, Any] = {"clean": clean, "crossed_cancel": self._take_crossed(), **self._last_receive()}
        if reason is not None:
            detail["reason"] = reason
        self.ctx.event("consumer_leave", self.name, self.name, detail=detail)

    def _wait_for_lanes(self, link: ConsumerLink) -> None:
        """Let a handler's calls in flight settle on `link` before it closes, for LANES_WAIT_S at most:
        a call still running then is left to the broker (it requeues the delivery when the link
        closes; the lane traces it unsettled when the call returns)."""
        deadline = time.monotonic() + LANES_WAIT_S
        while self._busy and link.is_open and time.monotonic() < deadline:
            self._has_work.clear()
            self._has_work.wait(0.05)
        if self._busy and link.is_open:
            log.warning(
                "consumer %s: %d handler call(s) still running %g s after it began to leave; leaving their "
                "deliveries to the broker",
                self.name,
                self._busy,
                LANES_WAIT_S,
            )

    def _crash(self, settings) -> None:
        """`leave: crash`: finish the delivery in hand without acking it, then drop the TCP
        connection without a word (no basic.cancel, no close): the broker finds the peer gone and
        requeues every unacked delivery with redelivered=true. Every delivery held is traced
        `crashed`; the one in hand keeps its processing start and end (it will be processed again)."""
        self._leaving = True  # the close that follows is this crash, not a lost connection
        link, in_hand = self._link, None
        assert link is not None
        if self._buffer:
            d, egress = self._take()
            self._busy += 1
            start_ns = self._now_ns()
            processing_ms, _ = self._work(d, settings)
            in_hand = (d, egress, start_ns, self._now_ns(), processing_ms)
        # Deliveries read until the broker closes its end are held (and traced crashed) too.
        if not link.crash(CLOSE_WAIT_S):
            log.warning(
                "consumer %s: the broker did not close its end %g s after the crash; aborting", self.name, CLOSE_WAIT_S
            )
        held = 0
        if in_hand is not None:
            d, egress, start_ns, end_ns, processing_ms = in_hand
            self._trace(d, start_ns, end_ns, None, "crashed", processing_ms, None, egress)
            held += 1
        while self._buffer:
            d, egress = self._take()
            self._trace(d, None, None, None, "crashed", None, None, egress[:3] + (None,))
            held += 1
        self._busy -= 1 if in_hand is not None else 0
        self._link = None
        self.ctx.event(
            "consumer_crash",
            self.name,
            self.name,
            float(held),
            detail={"unacked": held, "in_hand": in_hand[0].message_id if in_hand else None, **self._last_receive()},
        )
        log.info("consumer %s crashed on the timeline holding %d unacked deliveries", self.name, held)

    def _on_connection_closed(self, _conn, exc) -> None:
        if self._leaving:
            return
        self.ctx.event("connection_lost", self.name, self.name, detail={"reason": str(exc), **self._last_receive()})
        log.warning("consumer %s lost its connection: %s", self.name, exc)
        self._link = None
        self._trace_unsettled_buffer()

    def _on_channel_closed(self, link: ConsumerLink, reply_code: int, reply_text: str) -> None:
        """Runs in the hub: the broker closed this consumer's channel, its connection still open (a
        406 on an unknown delivery tag, a delivery held past consumer_timeout). The broker requeues
        every delivery it held: the buffer is traced unsettled now (the one in hand when its
        processing ends), each to be redelivered; the greenlet leaves the link and joins again."""
        if self._leaving or link is not self._link:
            return
        held = len(self._buffer) + self._busy
        self.ctx.event(
            "channel_closed",
            self.name,
            self.name,
            float(reply_code),
            detail={"reply_code": reply_code, "reply_text": reply_text, "unsettled": held},
        )
        log.warning(
            "consumer %s: the broker closed its channel (%s %s); %d unsettled deliveries %s; rejoining",
            self.name,
            reply_code,
            reply_text,
            held,
            "are read again from the stream" if self._stream else "go back to the queue",
        )
        self._trace_unsettled_buffer()
        self._fault = ("channel_closed", {"reply_code": reply_code})
        self._has_work.set()

    def _on_cancelled(self, link: ConsumerLink) -> None:
        """Runs in the hub: the broker cancelled the subscription (basic.cancel: the queue was
        deleted, or its node went away). The channel stays open: the greenlet processes and acks
        what is buffered, leaves the link and joins again."""
        if self._leaving or link is not self._link:
            return
        queue = self.ctx.scenario.queue.name
        self.ctx.event(
            "consumer_cancelled", self.name, self.name, detail={"queue": queue, "buffered": len(self._buffer)}
        )
        log.warning(
            "consumer %s: the broker cancelled its subscription to %r (basic.cancel); rejoining", self.name, queue
        )
        self._fault = ("cancelled", {})
        self._has_work.set()

    def _on_crossed_cancel(
        self, link: ConsumerLink, tag: int, redelivered: bool, headers, priority, size: int, raw=None
    ) -> None:
        """A delivery sent before the broker saw this consumer's basic.cancel: a delivery like any
        other (the broker counts it delivered here), counted for the event that follows."""
        self._crossed += 1
        self._on_message(link, tag, redelivered, headers, priority, size, raw)

    def _take_crossed(self) -> int:
        crossed, self._crossed = self._crossed, 0
        return crossed

    # -- the hot path -------------------------------------------------------
    def _on_message(
        self, link: ConsumerLink, tag: int, redelivered: bool, headers, priority, size: int, raw=None
    ) -> None:
        """Runs in the hub, right after the frame was read: stamp and buffer, nothing else; except
        that a delivery with nothing to wait for (no processing time, CoDel or egress, and an idle
        consumer with an empty buffer) is settled here and now, as the consumer's greenlet would
        the moment it woke, without the wake-up: what a plain pika consumer does in its callback."""
        read_ns = self._now_ns()
        stamps = link.stamps  # the kernel's arrival stamp of these bytes (loadgen.amqp.kstamp)
        receive_ns = stamps.kernel_ns if stamps is not None and 0 < stamps.kernel_ns <= read_ns else read_ns
        self._last_receive_ns = receive_ns
        if self._awaiting_active:
            self._became_active(receive_ns)
        headers = headers or {}
        t = self.ctx.elapsed_s()
        publish_ns = headers.get("sojourn-pub-ns")
        if type(publish_ns) is not int:
            publish_ns = header_int(publish_ns)
        d = Delivery(
            receive_ns,
            tag,
            redelivered,
            headers.get("sojourn-id"),
            publish_ns,
            size,
            self._prefetch,
            len(self._buffer),
            self.ctx.scenario.phase_at(t),
            link,
            headers.get("sojourn-proc-us"),
            priority,
            read_ns,
            raw,
            self._stream_offset(headers) if self._stream else None,
        )
        inline = self._inline_settings
        if inline is not None and t < self._inline_until and not self._buffer and not self._busy and not self._leaving:
            self.ctx.counters["delivered"] += 1
            self._process(d, _NO_EGRESS, inline, in_hub=True)
            return
        if self._egress is None:
            self._buffer.append(d)  # type: ignore[call-arg]  # no egress: the buffer is the deque
        else:
            discarded = self._egress.append(d, d.priority, d.size)
            if discarded:
                self._discard(discarded)
        self.ctx.counters["delivered"] += 1
        self._has_work.set()

    def _acked_on_stream(self, chosen: str) -> str:
        """A stream refuses nack and reject (the broker closes the connection): a handler's other
        outcome is acked, and said once per consumer."""
        if not self._said_stream_ack:
            self._said_stream_ack = True
            log.warning(
                "consumer %s: the handler chose %s, but a stream refuses nack and reject: acked instead "
                "(said once per consumer; the trace's settled_by still says the handler chose)",
                self.name,
                chosen,
            )
        return "ack"

    def _stream_offset(self, headers) -> int | None:
        """A stream delivery's offset (the broker's x-stream-offset header), noted as where to read on from."""
        offset = header_int(headers.get("x-stream-offset"))
        if offset is not None:
            self._position.received(offset)
        return offset

    def _became_active(self, receive_ns: int) -> None:
        """The first delivery since this consumer joined a single-active-consumer queue: the broker
        made it the active one (AMQP 0-9-1 says nothing else)."""
        self._awaiting_active = False
        self.ctx.event("consumer_active", self.name, self.name, detail={"receive_ns": receive_ns})

    def _last_receive(self) -> dict[str, Any]:
        """The leave events' detail on a single-active-consumer queue: the last delivery's receive time."""
        return {"last_receive_ns": self._last_receive_ns} if self._single_active else {}

    def _discard(self, discarded) -> None:
        """Egress discarded these (oldest first) to admit a new delivery: ack each so the broker
        forgets it (a frame the I/O loop writes; nothing waits) and trace it. Runs in the hub."""
        link = self._link
        for admitted in discarded:
            d = admitted.item
            settle_ns, outcome = None, "unsettled"
            if self._auto_ack:
                settle_ns, outcome = d.receive_ns, "egress_discard"
            elif link is not None and d.link is link and link.is_open:
                link.ack(d.tag)
                settle_ns, outcome = self._now_ns(), "egress_discard"
            self._trace(
                d,
                None,
                None,
                settle_ns,
                outcome,
                None,
                None,
                (admitted.egress_class, admitted.length, admitted.depth_units, None),
            )
            if settle_ns is not None:
                self.report("discard", self._discard_name, (settle_ns - d.receive_ns) / 1e6, d.size, None)

    def _take(self) -> tuple[Delivery, tuple]:
        """The next delivery to process and its egress columns (`_NO_EGRESS` without egress)."""
        if self._egress is None:
            return self._buffer.popleft(), _NO_EGRESS
        popped = self._egress.pop()
        a = popped.admitted
        return a.item, (a.egress_class, a.length, a.depth_units, popped.discard_indication)

    def _settles_on_arrival(self, settings) -> bool:
        """Whether a delivery under `settings` has nothing to wait for once it arrives."""
        p = settings.processing
        return (
            self.slot < settings.count
            and self._egress is None
            and settings.codel is None
            and p.distribution == "fixed"
            and p.params[0][1] == 0
            and self._handler is None
        )

    def _process_one(self, settings) -> None:
        d, egress = self._take()
        if not self._in_lanes:
            self._process(d, egress, settings)
            return
        # A handler's lane: counted busy before this greenlet goes on, so no more lanes start than allowed.
        self._busy += 1
        gevent.spawn(self._lane, d, egress, settings)

    def _lane(self, d: Delivery, egress: tuple, settings) -> None:
        self._busy -= 1  # _process counts it again at once (no switch in between)
        try:
            self._process(d, egress, settings)
        finally:
            self._has_work.set()  # a lane is free

    def _process(self, d: Delivery, egress: tuple, settings, in_hub: bool = False) -> None:
        """Process and settle `d`, and trace it. `in_hub`: called from `_on_message`, where the ack
        is sent at once only after the last delivery pika has read (its frame buffer is empty);
        earlier ones queue theirs, and the hub sends them together right after."""
        self._busy += 1
        start_ns = self._now_ns()
        codel = self._controller(settings)
        codel_state = None
        if codel is not None:
            drop = codel.on_dequeue(start_ns - d.receive_ns, start_ns, len(self._buffer))
            codel_state = codel.state()
            if drop:
                self._nack(d, start_ns, settings.codel.requeue, codel_state, egress)
                return
        end_ns = settle_ns = settled_by = handler_error = processing_ms = None
        outcome = "unsettled"
        try:
            processing_ms, result = self._work(d, settings)
            end_ns = self._now_ns()
            if result is not None:  # the handler's return chose; it is traced even if the link went meanwhile
                chosen, handler_error = result.outcome, result.error
                settled_by = "handler" if handler_error is None else "handler_error"
            else:
                chosen = "ack" if settings.outcomes is None else self._outcomes.draw(settings.outcomes)
            if self._stream and chosen != "ack":
                chosen = self._acked_on_stream(chosen)
            if settings.ack_mode == "auto":
                settle_ns, outcome = d.receive_ns, "auto_ack"
            elif d.link is self._link and d.link.is_open:
                if chosen == "ack":
                    # Nothing more to ack soon: it goes now, and the trace is written while it travels.
                    now = not self._buffer and (not in_hub or not d.link.reading())
                    d.link.ack(d.tag, now=now)
                else:
                    settle(d.link, d.tag, chosen)
                    settled_by = settled_by or "rate"
                settle_ns, outcome = self._now_ns(), chosen
        finally:
            self._busy -= 1
            self._trace(
                d, start_ns, end_ns, settle_ns, outcome, processing_ms, codel_state, egress, settled_by, handler_error
            )
        if outcome in ("ack", "auto_ack"):
            self.ctx.counters["acked"] += 1
            latency_ms = (end_ns - d.publish_ns) / 1e6 if d.publish_ns else 0.0
            self.report("consume", self._request_name, latency_ms, d.size, None)
        elif settle_ns is not None:
            self.report("nack", self._nack_name, (settle_ns - d.receive_ns) / 1e6, d.size, None)

    def _work(self, d: Delivery, settings) -> tuple[float, Result | None]:
        """Process `d`: the group's handler on it (its result too), or the simulated processing
        time drawn for it; the processing time in ms."""
        if self._handler is not None:
            body, properties, routing_key, exchange = d.raw or (b"", None, "", "")
            headers = getattr(properties, "headers", None) or {}
            result = self._handler.call(Message(body, properties, headers, routing_key, exchange, d.redelivered))
            return result.elapsed_ns / 1e6, result
        processing_ms = settings.processing.sample_ms(
            self.rng, d.recorded_us / 1000 if isinstance(d.recorded_us, int) else None
        )
        if processing_ms > 0:
            self._simulate(processing_ms / 1000.0)
        return processing_ms, None

    def _controller(self, settings) -> CoDel | None:
        """This consumer's CoDel controller, or None: CoDel off, or auto-ack (nothing to nack)."""
        spec = settings.codel
        if spec is None or settings.ack_mode == "auto":
            return None
        if spec != self._codel_spec:
            self._codel, self._codel_spec = CoDel(spec.target_ms, spec.interval_ms), spec
        return self._codel

    def _nack(self, d: Delivery, start_ns: int, requeue: bool, codel_state, egress: tuple = _NO_EGRESS) -> None:
        """CoDel dropped `d` as it left the buffer: nack it on its own channel (a frame
        written by the I/O loop; nothing here waits), trace it and report it to Locust."""
        settle_ns, outcome = None, "unsettled"
        try:
            if d.link is self._link and d.link.is_open:
                chosen = "nack_requeue" if requeue else "nack_discard"
                settle(d.link, d.tag, chosen)
                settle_ns, outcome = self._now_ns(), chosen
        finally:
            self._busy -= 1
            self._trace(d, start_ns, None, settle_ns, outcome, None, codel_state, egress, "codel")
        if settle_ns is not None:
            self.report("nack", self._nack_name, (start_ns - d.receive_ns) / 1e6, d.size, None)

    def _simulate(self, seconds: float) -> None:
        """Sleep cooperatively for `seconds` of processing.

        gevent's timers wake late (epoll waits in whole milliseconds): a 4 ms sleep
        lasts about 4.7 ms here. Asking for less by the running mean of that
        overshoot keeps the mean simulated processing time on target without
        busy-waiting. The mean is a plain one over the first sleeps, then weighs
        the newest by OVERSHOOT_WEIGHT: started at 0 with that weight alone, the
        first few dozen sleeps of a run were uncorrected, which put a phase's
        mean over 5 % long on a loaded machine.
        """
        asked = max(0.0, seconds - self._overshoot_s)
        began = time.perf_counter()
        gevent.sleep(asked)
        overshoot = (time.perf_counter() - began) - asked
        self._overshoot_n += 1
        weight = max(OVERSHOOT_WEIGHT, 1.0 / self._overshoot_n)
        self._overshoot_s += weight * (min(overshoot, seconds) - self._overshoot_s)

    def _trace_unsettled_buffer(self) -> None:
        while self._buffer:
            d, egress = self._take()
            self._trace(d, None, None, None, "unsettled", None, None, egress[:3] + (None,))

    def _trace(
        self,
        d: Delivery,
        start_ns,
        end_ns,
        settle_ns,
        outcome: str,
        processing_ms,
        codel_state=None,
        egress: tuple = _NO_EGRESS,
        settled_by: str | None = None,
        handler_error: str | None = None,
    ) -> None:
        """One delivery row; `codel_state` is the controller's state after deciding on `d`
        (loadgen.rules.codel.CoDelState), None when CoDel is off or never saw `d`; `egress` its
        (class, length, units, discard indication) columns, all None without egress. On a stream, a
        delivery left unsettled is read again by the next subscription (StreamPosition.unsettled)."""
        if outcome == "unsettled" and d.stream_offset is not None:
            self._position.unsettled(d.stream_offset)
        self.ctx.writer.append(
            "delivery",
            delivery_row(
                d,
                self.name,
                self.group,
                start_ns,
                end_ns,
                settle_ns,
                outcome,
                processing_ms,
                codel_state,
                egress,
                settled_by,
                handler_error,
            ),
        )
