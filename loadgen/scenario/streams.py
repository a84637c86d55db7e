"""Streams (`queue.type: stream`): what a stream accepts, and where each consumer group starts reading.

A RabbitMQ stream is an append-only log: a delivery does not remove its message, every consumer
reads every message from where it attached (the `x-stream-offset` consume argument), and the broker
requires a prefetch and manual acks of a stream consumer. Pure: the rules follow RabbitMQ 3.10
(docs/scenarios.md, "Streams").
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from typing import Any

from analysis.schema import MAX_STREAM_GROUPS
from loadgen.scenario.checks import Check, fail, integer
from loadgen.scenario.errors import Invalid, show

__all__ = [
    "OFFSET_WORDS",
    "stream_offset",
    "consume_offset",
    "STREAM_ARGUMENT_CHECKS",
    "STREAM_REFUSES",
    "MAX_STREAM_GROUPS",
    "check_stream_consumers",
    "stream_group_refusal",
]

OFFSET_WORDS = ("first", "last", "next")
"""first: the oldest message the stream holds; last: the start of the last chunk written; next: only
messages written after the consumer attached."""

_MAX_AGE = re.compile(r"[1-9][0-9]*[YMDhms]\Z")


def _max_age(value: Any) -> str:
    if isinstance(value, str) and _MAX_AGE.match(value):
        return value
    raise Invalid(f"expected a number and a unit of Y, M, D, h, m or s (e.g. 7D, 12h), got {show(value)}")


STREAM_ARGUMENT_CHECKS: dict[str, Check] = {
    "x-max-age": _max_age,
    "x-stream-max-segment-size-bytes": integer(1),
}
"""The stream's own arguments (x-max-length-bytes is checked with the other queue arguments)."""

STREAM_REFUSES = {
    "x-max-length": "a stream is bounded by bytes and age only: use x-max-length-bytes or x-max-age",
    "x-overflow": "a stream never refuses or drops a publish for length: it truncates its oldest segments",
    "x-message-ttl": "a stream keeps messages by age for the whole stream: use x-max-age",
    "x-max-priority": "a stream has no message priorities",
    "x-dead-letter-exchange": "a stream never dead-letters: nothing leaves it",
    "x-dead-letter-routing-key": "a stream never dead-letters: nothing leaves it",
    "x-delivery-limit": "a stream counts no deliveries: nothing is requeued to it",
    "x-single-active-consumer": "RabbitMQ 3.10 has no single active consumer on a stream over AMQP 0-9-1",
    "x-queue-mode": "x-queue-mode is a classic-queue setting; a stream refuses it",
}
"""Queue arguments a stream refuses, with why (the broker refuses most of them at declare time)."""


def stream_offset(value: Any) -> str | int:
    """`consumers[].offset`: first, last, next, a non-negative offset, or an ISO 8601 timestamp with
    a time and a time zone (kept as written: run.json is JSON; consume_offset makes the AMQP value)."""
    if isinstance(value, bool):
        raise Invalid(f"expected first, last, next, an offset (an integer >= 0) or a timestamp, got {show(value)}")
    if isinstance(value, int):
        if value < 0:
            raise Invalid(f"expected an offset >= 0, got {show(value)}")
        return value
    if isinstance(value, _dt.datetime):  # YAML reads an unquoted timestamp as a datetime
        if value.tzinfo is None:
            raise Invalid(_NEEDS_ZONE.format(text=value.isoformat()))
        return value.isoformat()
    if isinstance(value, _dt.date):  # and an unquoted date as a date
        raise Invalid(_NEEDS_TIME.format(text=value.isoformat()))
    if isinstance(value, str):
        if value in OFFSET_WORDS:
            return value
        if _DATE_ONLY.match(value):
            raise Invalid(_NEEDS_TIME.format(text=value))
        try:
            stamp = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            stamp = None
        if stamp is not None and stamp.tzinfo is not None:
            return value
        if stamp is not None:
            raise Invalid(_NEEDS_ZONE.format(text=value))
    raise Invalid(
        f"expected first, last, next, an offset (an integer >= 0) or an ISO 8601 timestamp "
        f"(e.g. 2026-12-05T10:00:00Z), got {show(value)}"
    )


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}([+-]\d{2}:?\d{2}|Z)?\Z")
_NEEDS_TIME = (
    "a date alone is no place in a stream: give a time and a time zone (e.g. {text:.10}T00:00:00Z), got {text!r}"
)
_NEEDS_ZONE = "a timestamp needs a time zone (e.g. {text}Z or {text}+01:00), got {text!r}"


def consume_offset(offset: str | int) -> str | int | _dt.datetime:
    """The `x-stream-offset` consume argument for a checked offset: a timestamp as a datetime, which
    pika sends as an AMQP timestamp (seconds: the broker starts at the chunk holding that second)."""
    if isinstance(offset, int) or offset in OFFSET_WORDS:
        return offset
    return _dt.datetime.fromisoformat(offset.replace("Z", "+00:00"))


_NO_SETTLE_BUT_ACK = "a nack or reject removes nothing from a stream and requeues nothing"


def stream_group_refusal(field: str, value: Any) -> str | None:
    """Why a stream consumer group may not have `field` at `value` (None: it may). One rule per field,
    for the group (check_stream_consumers) and for a phase that sets it (the loader's timeline)."""
    if field == "ack_mode" and value != "manual":
        return "a stream consumer needs ack_mode: manual (RabbitMQ)"
    if field == "prefetch" and value == 0:
        return "a stream consumer needs a prefetch > 0 (RabbitMQ refuses an unbounded one)"
    if field == "prefetch_scope" and value == "channel":
        return (
            "a stream consumer needs its own prefetch (prefetch_scope: consumer): RabbitMQ refuses to "
            "subscribe to a stream under a channel-wide one"
        )
    if field == "count" and value > 1:
        return (
            "on a stream every consumer reads every message: a group of N consumers would read each message "
            "N times; declare one group (count: 1) per reader"
        )
    if field in ("outcomes", "codel", "egress") and value is not None:
        return f"{_NO_SETTLE_BUT_ACK} (the broker closes a consumer's connection for one): {field} has no meaning there"
    if field == "leave" and value == "crash":
        return "a dropped connection requeues nothing on a stream: leave: crash has no meaning there"
    return None


_GROUP_FIELDS = ("ack_mode", "prefetch", "prefetch_scope", "count", "outcomes", "codel", "egress", "leave")


def check_stream_consumers(source: str, stream: bool, consumers: Sequence[Any]) -> None:
    """On a stream every consumer is a reader of its own: a group reads with one consumer, its own
    prefetch and manual acks, and settles by ack (stream_group_refusal). Elsewhere `offset` has no meaning."""
    if stream and len(consumers) > MAX_STREAM_GROUPS:
        fail(
            source,
            "consumers",
            f"{len(consumers)} groups",
            f"a stream's accounting follows at most {MAX_STREAM_GROUPS} consumer groups",
        )
    for i, group in enumerate(consumers):
        where = f"consumers[{i}]"
        if not stream:
            if group.offset is not None:
                fail(
                    source,
                    f"{where}.offset",
                    group.offset,
                    "offset is where a consumer starts reading a stream: set queue.type: stream, or remove it",
                )
            continue
        for field in _GROUP_FIELDS:
            value = getattr(group, field)
            refusal = stream_group_refusal(field, value)
            if refusal:
                shown = value if isinstance(value, (str, int)) else None
                fail(source, f"{where}.{field}", shown, f"consumer group {group.name!r} reads a stream: {refusal}")
        if group.handler is not None and group.handler.on_error != "discard":
            fail(
                source,
                f"{where}.handler.on_error",
                group.handler.on_error,
                "on a stream nothing is requeued: leave on_error at discard",
            )
