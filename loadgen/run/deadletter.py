"""Dead-letter capture: every message the broker dead-letters from the run's queue becomes a trace row.

When the queue has `x-dead-letter-exchange`, the process that declares the topology (the
local runner or the master) binds a capture queue `sojourn.<queue>.dead-letters` to that
exchange and consumes it (auto-ack) for the whole run, drain included. Each message read
is a `deadletter` row with the broker's reason from its `x-death` header, so the analysis
accounts for overflow, expiry, rejection and the quorum delivery limit by reason
(docs/discards.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from loadgen.amqp import connection as amqp, topology
from loadgen.scenario.names import capture_queue_name

__all__ = [
    "CapturePlan",
    "capture_plan",
    "capture_queue_name",
    "capture_warnings",
    "dead_letter_row",
    "DeadLetterCapture",
    "CREATED_EXCHANGE_TYPE",
    "SWEEP_LIMIT",
]

log = logging.getLogger("sojourn")

CREATED_EXCHANGE_TYPE = "fanout"
"""A dead-letter exchange that does not exist yet is declared fanout and not durable: every
dead-letter reaches the capture queue whatever its routing key, and the exchange goes away
with the broker's next restart instead of lingering as configuration nobody asked for."""

SWEEP_LIMIT = 200_000
"""At the end, at most this many dead-letters still in the capture queue are read one by one."""

# Arguments with which the broker throws messages away (or dead-letters them when it can).
_DISCARDING = ("x-max-length", "x-max-length-bytes", "x-message-ttl", "x-delivery-limit")
_REJECTING_OVERFLOW = ("reject-publish", "reject-publish-dlx")


class CapturePlan(NamedTuple):
    """What to declare: the dead-letter exchange, the capture queue and its binding keys."""

    exchange: str
    queue: str  # the capture queue
    source_queue: str  # the run's queue
    binding_keys: tuple[str, ...]


def capture_plan(scenario: Any) -> CapturePlan | None:
    """The capture for this scenario, or None when its queue has no dead-letter exchange.

    The exchange's type can not be asked of the broker (a passive declare does not say it),
    so the capture queue is bound with every key any type needs: `#` (topic: everything), the
    `x-dead-letter-routing-key` if set, else the routing keys the producers use (direct: a
    dead-letter keeps its original key), and "" (fanout ignores keys). A binding that does
    not match on the actual type matches nothing, and a message matched by several bindings
    reaches the queue once. The default exchange ("") can not be bound to: no capture.
    """
    q = scenario.queue
    exchange = q.arguments.get("x-dead-letter-exchange")
    if not isinstance(exchange, str) or exchange == "":
        return None
    dl_key = q.arguments.get("x-dead-letter-routing-key")
    keys = ["#"]
    if isinstance(dl_key, str):
        keys.append(dl_key)
    else:
        keys.extend(p.routing_key for p in scenario.producers)
    keys.append("")
    return CapturePlan(exchange, capture_queue_name(q.name), q.name, tuple(dict.fromkeys(keys)))


def capture_warnings(scenario: Any) -> list[str]:
    """Discards sojourn can not explain with this scenario's queue arguments, worded for the console."""
    args: Mapping[str, Any] = scenario.queue.arguments
    out: list[str] = []
    dlx = args.get("x-dead-letter-exchange")
    overflow = args.get("x-overflow", "drop-head")
    discarding = [
        a for a in _DISCARDING if a in args and not (a.startswith("x-max-length") and overflow in _REJECTING_OVERFLOW)
    ]
    if discarding and dlx is None:
        out.append(
            f"queue.arguments: {', '.join(discarding)} without x-dead-letter-exchange: messages the "
            f"broker drops can not be captured and are reported as unaccounted; add "
            f"x-dead-letter-exchange (for example sojourn.dlx) to account for them (docs/discards.md)"
        )
    if dlx == "":
        out.append(
            'queue.arguments: x-dead-letter-exchange is the default exchange (""), which can not be '
            "bound to: dead-lettered messages are not captured and are reported as unaccounted"
        )
    if overflow in _REJECTING_OVERFLOW and ("x-max-length" in args or "x-max-length-bytes" in args):
        blind = [p.name for p in scenario.producers if not p.confirms]
        if blind:
            out.append(
                f"queue.arguments: x-overflow {overflow} refuses publishes when the queue is full, but "
                f"producers {', '.join(blind)} publish without confirms: the broker's refusals are "
                f"invisible to them and the messages are reported as unaccounted"
            )
    return out


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


def dead_letter_row(method: Any, properties: Any, received_ns: int, source_queue: str) -> tuple | None:
    """The deadletter trace row (after the common columns) for one captured message, or None
    when it was not dead-lettered from `source_queue`: published to the exchange directly (no
    `x-death`), or dead-lettered from another queue that shares the dead-letter exchange.

    The row describes the `x-death` entry of `source_queue` (the broker keeps one per queue and
    reason, most recent first): if the message went on to die again elsewhere, what took it out
    of the run's queue is still the reason recorded."""
    headers = getattr(properties, "headers", None) or {}
    deaths = headers.get("x-death")
    if not isinstance(deaths, (list, tuple)):
        return None
    death = next((d for d in deaths if isinstance(d, Mapping) and _text(d.get("queue")) == source_queue), None)
    if death is None:
        return None
    count = death.get("count")
    return (
        _text(headers.get("sojourn-id")),
        source_queue,
        _text(death.get("reason")) or "",
        int(count) if isinstance(count, int) else 1,
        received_ns,
        _text(method.exchange) or "",
        _text(method.routing_key) or "",
    )


class DeadLetterCapture:
    """Declares the capture topology and consumes the capture queue on a connection of its own."""

    def __init__(self, ctx: Any, plan: CapturePlan):
        self.ctx = ctx
        self.plan = plan
        self.captured = 0
        self.foreign = 0  # not dead-lettered from the run's queue (no x-death, or another queue's)
        self._conn: Any = None  # pika has no types
        self._channel: Any = None
        self._tag: str | None = None

    # -- setup ----------------------------------------------------------------
    def declare(self, purge: bool) -> None:
        """The exchange if it is missing, the capture queue and its bindings. `purge`: the run's start
        (the declaring process): a capture queue that existed before the run and holds messages is
        purged, kept or refused as `queue.purge_on_start` says, like the run's queue (broker_side)."""
        from loadgen.errors import QueueHoldsMessages
        from loadgen.run.broker_side import start_policy

        plan = self.plan
        purge_on_start = self.ctx.scenario.queue.purge_on_start
        probe = self.ctx.new_channel()  # a missing exchange closes the channel it was asked on
        try:
            exists = topology.exchange_exists(probe, plan.exchange)
        finally:
            if probe.is_open:
                probe.close()
        found = self.ctx.queue_counts_if_exists(plan.queue) if purge else None
        where = f"{self.ctx.scenario.source_path}: queue.purge_on_start"
        if found is not None and start_policy(True, found[0], purge_on_start) == "refuse":
            raise QueueHoldsMessages(where, plan.queue, found[0])
        channel = self.ctx.new_channel()
        try:
            if not exists:
                topology.declare_exchange(channel, plan.exchange, exchange_type=CREATED_EXCHANGE_TYPE, durable=False)
                log.info("declared dead-letter exchange %r (%s, not durable)", plan.exchange, CREATED_EXCHANGE_TYPE)
            depth = topology.declare_queue(channel, plan.queue, durable=False, auto_delete=False, arguments={})
            if purge:
                if found is None:
                    self.ctx.note_created("queue", plan.queue)
                policy = start_policy(found is not None, depth, purge_on_start)
                if policy == "refuse":  # dead-letters arrived since the passive declare
                    raise QueueHoldsMessages(where, plan.queue, depth)
                if policy == "purge":
                    purged = topology.purge_queue(channel, plan.queue)
                    self.ctx.event("broker_depth", "runner", plan.queue, float(depth), {"purged": True})
                    log.warning(
                        "dead-letter capture queue %r: purged %d messages it held before the run "
                        "(queue.purge_on_start: true)",
                        plan.queue,
                        purged,
                    )
                elif policy == "keep":
                    log.warning(
                        "dead-letter capture queue %r: keeping the %d messages it held before the run "
                        "(queue.purge_on_start: false); they are read as dead-letters of this run's queue",
                        plan.queue,
                        depth,
                    )
            for key in plan.binding_keys:
                topology.bind_queue(channel, plan.queue, plan.exchange, key)
        finally:
            if channel.is_open:
                channel.close()
        self.ctx.event(
            "deadletter_capture",
            "runner",
            plan.queue,
            detail={"exchange": plan.exchange, "created_exchange": not exists, "binding_keys": list(plan.binding_keys)},
        )

    def start(self) -> None:
        """Consume the capture queue (auto-ack: a dead-letter is ours once read) until stop()."""
        self._conn = self.ctx.connect_direct(
            f"sojourn-deadletters-{self.ctx.worker}", on_close=self._on_connection_closed
        )
        self._channel = amqp.open_channel(self._conn)
        self._tag = self._channel.basic_consume(self.plan.queue, self._on_message, auto_ack=True)

    # -- capture --------------------------------------------------------------
    def _on_message(self, _channel, method, properties, _body) -> None:
        self._record(method, properties)

    def _record(self, method, properties) -> None:
        row = dead_letter_row(method, properties, time.time_ns(), self.plan.source_queue)
        if row is None:
            self.foreign += 1
            return
        self.ctx.writer.append("deadletter", row)
        self.captured += 1

    def _on_connection_closed(self, _conn, exc) -> None:
        if not self.ctx.stopping.is_set():
            self.ctx.event("connection_lost", "deadletters", self.plan.queue, detail={"reason": str(exc)})
            log.warning(
                "dead-letter capture lost its connection (%s); later dead-letters are left in %r and read at the end",
                exc,
                self.plan.queue,
            )

    # -- end --------------------------------------------------------------------
    def stop(self, limit: int = SWEEP_LIMIT) -> int:
        """Stop consuming, then read whatever is still in the capture queue (e.g. after a lost
        connection, or dead-lettered after the drain) so nothing is left there; return the count read."""
        if self._channel is not None and self._channel.is_open and self._tag is not None:
            try:
                amqp.wait_for(
                    lambda cb: self._channel.basic_cancel(self._tag, callback=cb),
                    f"basic.cancel {self.plan.queue!r}",
                    10.0,
                    channel=self._channel,
                )
            except Exception as exc:  # noqa: BLE001 - the sweep below reads what is left anyway
                log.warning("dead-letter capture: cancel failed: %s", exc)
        self.close()
        swept = self._sweep(limit)
        self.ctx.event(
            "deadletter_capture",
            "runner",
            self.plan.queue,
            float(self.captured),
            {"swept": swept, "foreign": self.foreign},
        )
        return swept

    def _sweep(self, limit: int) -> int:
        channel = self.ctx.new_channel()
        swept = 0
        try:
            depth = topology.queue_depth(channel, self.plan.queue)
            while swept < min(depth, limit):
                method, props = amqp.wait_for(
                    lambda cb: channel.basic_get(
                        self.plan.queue,
                        lambda _ch, got_method, got_props, _body: cb((got_method, got_props)),
                        auto_ack=True,
                    ),
                    f"basic.get {self.plan.queue!r}",
                    10.0,
                    channel=channel,
                )
                self._record(method, props)
                swept += 1
                if method.message_count == 0:
                    break
            if depth > limit:
                log.warning(
                    "dead-letter capture: %d dead-letters left in %r; read the first %d", depth, self.plan.queue, limit
                )
        finally:
            if channel.is_open:
                channel.close()
        return swept

    def close(self) -> None:
        """Close the capture connection (rows already read are in the trace writer)."""
        conn, self._conn, self._channel = self._conn, None, None
        if conn is not None and conn.is_open:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
