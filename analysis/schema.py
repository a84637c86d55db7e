"""The trace schema: the one contract between the load generator and the analysis.

Columns are declared once here as plain Python; `arrow_schema()` (used by the
trace writer in loadgen) and `spark_schema()` (used by the analysis job and the
Spark tests) are derived from the same declaration, so the two halves can not
drift apart. Times are integer nanoseconds of the wall clock (`time.time_ns`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = [
    "SCHEMA_VERSION",
    "READABLE_VERSIONS",
    "READABLE_VERSIONS_TEXT",
    "MAX_STREAM_GROUPS",
    "Column",
    "KINDS",
    "PUBLISH",
    "DELIVERY",
    "EVENT",
    "LEFTOVER",
    "DEADLETTER",
    "DEAD_LETTER_REASONS",
    "PUBLISH_OUTCOMES",
    "DELIVERY_OUTCOMES",
    "EVENT_KINDS",
    "columns",
    "column_names",
    "arrow_schema",
    "spark_schema",
    "markdown_tables",
]

SCHEMA_VERSION = 7  # 2: CoDel state on deliveries; network events. 3: priority and replay columns on
# publishes, and the deadletter kind (dead-lettered messages, with the broker's reason). 4: consumer
# crashes, client egress classes and broker queue samples. 5: read_ns on deliveries (receive_ns is
# the kernel's arrival stamp where there is one). 6: settled_by and handler_error on deliveries (outcome
# rates and handlers), and the reject outcome. 7: stream_offset on deliveries (streams)
READABLE_VERSIONS = (4, 5, 6, 7)
"""Trace versions the analysis reads: a version-4 trace lacks the columns added since (`since`
5), which read as null."""
READABLE_VERSIONS_TEXT = " or ".join(
    filter(None, (", ".join(map(str, READABLE_VERSIONS[:-1])), str(READABLE_VERSIONS[-1])))
)
"""READABLE_VERSIONS as an error message says it ("4, 5 or 6")."""

MAX_STREAM_GROUPS = 62
"""The consumer groups of a stream the analysis follows, a bit of a long each
(analysis/transforms/streams.py): the scenario loader refuses more."""

ColumnType = Literal["string", "int32", "int64", "float64", "bool"]


class Column(NamedTuple):
    name: str
    type: ColumnType
    nullable: bool
    doc: str
    since: int = 1  # the schema version that added it: an older trace lacks it and reads as null


def _c(name: str, type_: ColumnType, doc: str, nullable: bool = False, since: int = 1) -> Column:
    return Column(name, type_, nullable, doc, since)


_COMMON = (
    _c("schema_version", "int32", "trace schema version (this file's SCHEMA_VERSION)"),
    _c("run_id", "string", "id of the run, the same in every file of one run"),
    _c("worker", "string", "process that wrote the row: host:pid"),
)

PUBLISH = _COMMON + (
    _c("message_id", "string", "unique message id, also sent in the `sojourn-id` header"),
    _c("producer", "string", "producer instance (group/worker/slot)"),
    _c("producer_group", "string", "producer group name from the scenario"),
    _c("seq", "int64", "per-producer sequence number, from 0"),
    _c("phase", "string", "timeline phase at the intended send time ('base' outside any phase)"),
    _c("intended_ns", "int64", "when the arrival schedule wanted the message sent"),
    _c("publish_ns", "int64", "when basic.publish was called (actual send time)"),
    _c("size_bytes", "int32", "body size in bytes"),
    _c("routing_key", "string", "routing key used"),
    _c("persistent", "bool", "delivery_mode 2"),
    _c("confirm_ns", "int64", "when the broker's confirm (ack or nack) arrived", nullable=True),
    _c("outcome", "string", "one of PUBLISH_OUTCOMES"),
    _c("priority", "int32", "AMQP priority property sent (null: none)", nullable=True),
    _c(
        "replay_index",
        "int64",
        "replay: the row's index in the replay source (0-based, after sorting by time); null for synthetic arrivals",
        nullable=True,
    ),
    _c(
        "replay_loop",
        "int32",
        "replay: which pass over the source (0 = first); null for synthetic arrivals",
        nullable=True,
    ),
    _c(
        "blocked_ms",
        "float64",
        "how long the publish waited because the broker had blocked the connection "
        "(connection.blocked: a resource alarm); null when it did not wait",
        nullable=True,
    ),
)

DELIVERY = _COMMON + (
    _c("message_id", "string", "from the `sojourn-id` header; null for a foreign message", nullable=True),
    _c("consumer", "string", "consumer instance (group/worker/slot)"),
    _c("consumer_group", "string", "consumer group name from the scenario"),
    _c("phase", "string", "timeline phase at receive time"),
    _c("delivery_tag", "int64", "AMQP delivery tag on the consumer's channel"),
    _c("redelivered", "bool", "the broker's redelivered flag"),
    _c("publish_ns", "int64", "publish time carried in the `sojourn-pub-ns` header", nullable=True),
    _c(
        "receive_ns",
        "int64",
        "when the delivery's bytes reached the consumer's socket (the kernel's SO_TIMESTAMPNS stamp); "
        "where there is none (another platform, a trace before version 5) when it was read (read_ns)",
    ),
    _c("start_ns", "int64", "when processing started (left the client buffer)", nullable=True),
    _c("end_ns", "int64", "when processing ended", nullable=True),
    _c("settle_ns", "int64", "when the ack or nack was sent; receive time for auto-ack", nullable=True),
    _c("outcome", "string", "one of DELIVERY_OUTCOMES"),
    _c("prefetch", "int32", "prefetch count in force at receive time (0 = unlimited)"),
    _c("buffer_len", "int32", "deliveries already waiting in the client buffer when this one arrived"),
    _c("size_bytes", "int32", "body size in bytes"),
    _c("processing_ms", "float64", "simulated processing time drawn for this delivery", nullable=True),
    _c(
        "codel_dropping",
        "bool",
        "CoDel: in the dropping state after deciding on this delivery (null: CoDel off)",
        nullable=True,
    ),
    _c("codel_count", "int32", "CoDel: drop count after deciding on this delivery", nullable=True),
    _c("codel_first_above_ns", "int64", "CoDel: first-above-target deadline (0 = not above target)", nullable=True),
    _c("codel_drop_next_ns", "int64", "CoDel: when the next drop is due while dropping", nullable=True),
    _c("priority", "int32", "the message's AMQP priority property (null: none)", nullable=True),
    _c(
        "egress_class",
        "string",
        "egress: the class of the consumer's buffer it went to (null: egress off)",
        nullable=True,
    ),
    _c(
        "egress_length",
        "int32",
        "egress: messages in its class right after it was admitted, after the discards "
        "its admission made (itself included)",
        nullable=True,
    ),
    _c("egress_units", "int64", "egress: the class's depth in 2,048-byte work units at the same moment", nullable=True),
    _c(
        "discard_indication",
        "bool",
        "egress: it was the first message taken from the buffer after a discard "
        "(Solace's discard indication); null when egress is off or it never left the buffer",
        nullable=True,
    ),
    _c(
        "read_ns",
        "int64",
        "when the consumer's process read the delivery (its callback ran); read_ns - receive_ns is "
        "the time it waited in the socket (null in a trace before version 5)",
        nullable=True,
        since=5,
    ),
    _c(
        "settled_by",
        "string",
        "what chose a settle other than the plain ack after processing: `codel` (CoDel nacked it as it "
        "left the buffer), `rate` (the group's outcome rates drew a nack or reject), `handler` (the "
        "group's handler returned the outcome, an ack included), `handler_error` (the handler raised: "
        "settled as its on_error says); null otherwise, and in a trace before version 6",
        nullable=True,
        since=6,
    ),
    _c(
        "handler_error",
        "string",
        "the handler's exception type (module.Class) when it raised on this delivery; null otherwise",
        nullable=True,
        since=6,
    ),
    _c(
        "stream_offset",
        "int64",
        "on a stream: the message's offset in it (the broker's x-stream-offset header); null on other "
        "queues, and in a trace before version 7",
        nullable=True,
        since=7,
    ),
)

EVENT = _COMMON + (
    _c("ts_ns", "int64", "when the event happened"),
    _c("kind", "string", "one of EVENT_KINDS"),
    _c("source", "string", "who recorded it: a user instance, 'runner' or 'census'"),
    _c("name", "string", "phase name, consumer name, queue name ... depending on kind"),
    _c("value", "float64", "numeric payload (e.g. queue depth), if any", nullable=True),
    _c("detail", "string", "JSON object with anything else", nullable=True),
)

LEFTOVER = _COMMON + (
    _c("message_id", "string", "id of a message still in the broker's queue after the drain", nullable=True),
    _c("queue", "string", "queue it was found in"),
    _c("observed_ns", "int64", "when the census saw it"),
    _c("redelivered", "bool", "the broker's redelivered flag at census time"),
)

DEADLETTER = _COMMON + (
    _c("message_id", "string", "from the `sojourn-id` header; null for a foreign message", nullable=True),
    _c("queue", "string", "the run's queue it was dead-lettered from (other queues' dead-letters are not recorded)"),
    _c("reason", "string", "why: `reason` of that queue's `x-death` entry, one of DEAD_LETTER_REASONS"),
    _c("death_count", "int64", "times it was dead-lettered from that queue for that reason (`count` of the entry)"),
    _c("received_ns", "int64", "when sojourn's capture consumer read it off the capture queue"),
    _c("exchange", "string", "dead-letter exchange it arrived through"),
    _c("routing_key", "string", "routing key it arrived with"),
)

KINDS: dict[str, tuple[Column, ...]] = {
    "publish": PUBLISH,
    "delivery": DELIVERY,
    "event": EVENT,
    "leftover": LEFTOVER,
    "deadletter": DEADLETTER,
}

PUBLISH_OUTCOMES = {
    "confirmed": "the broker acked the publish (publisher confirms on)",
    "sent": "written to the socket; confirms off, so no broker answer is expected",
    "nacked": "the broker nacked the publish: discarded, reason publish_nacked",
    "unconfirmed": "confirms on, but no answer before the connection closed or the run ended",
    "channel_closed": "confirms on, not yet confirmed when the broker closed the producer's channel while its "
    "connection stayed open (a publish to an exchange that is gone: 404; a 406; a `channel_closed` event names "
    "the reply): never confirmed; the broker had routed the ones before the publish that caused the close "
    "(acked or left in the broker like any other) and dropped the rest: discarded, reason channel_closed",
    "failed": "basic.publish raised (connection gone); never reached the socket",
    "returned": "mandatory publish that no queue took: the broker returned it (basic.return); discarded, "
    "reason unroutable",
    "blocked_timeout": "the connection stayed blocked (connection.blocked) longer than the producer's "
    "max_blocked_wait_s: the publish was given up, never sent; or it was written while "
    "the block began and the connection was still blocked when the producer left, so the "
    "broker never read it; discarded, reason publish_failed_blocked",
}

DELIVERY_OUTCOMES = {
    "ack": "processed and acked",
    "auto_ack": "auto-ack mode: the broker counted it delivered when it sent it; processed",
    "nack_requeue": "nacked with requeue=true (CoDel, the outcome rates or a handler: settled_by): back to "
    "the queue, redelivered later",
    "nack_discard": "nacked with requeue=false (CoDel, the outcome rates or a handler: settled_by): discarded "
    "(dead-lettered if the queue has a DLX), reason consumer_nack_discard",
    "reject": "rejected with requeue=false (basic.reject; the outcome rates or a handler): discarded "
    "(dead-lettered if the queue has a DLX), reason consumer_reject",
    "unsettled": "the channel closed before it was settled; the broker requeues it",
    "egress_discard": "egress: discarded from a full class of the consumer's buffer, oldest first, never "
    "processed; acked so the broker forgets it (settle_ns = the ack; receive time for auto-ack)",
    "crashed": "held (buffered, or processed but not acked) when its consumer crashed on the timeline "
    "(leave: crash): the broker requeues it; a processed one keeps start_ns and end_ns",
}

DEAD_LETTER_REASONS = {
    "maxlen": "the queue was over x-max-length / x-max-length-bytes: dropped from the head (drop-head), "
    "or refused at publish (reject-publish-dlx)",
    "expired": "its TTL ran out in the queue (x-message-ttl or the per-message expiration)",
    "rejected": "a consumer nacked or rejected it with requeue=false",
    "delivery_limit": "quorum queue: delivered more than x-delivery-limit times (requeued too often)",
}

EVENT_KINDS = {
    "run_start": "a process (name = local, master or worker) started setting up its part of the run",
    "start_barrier": "every participant was ready: the run's t0 is fixed (detail: t0_ns, startup_s "
    "since the run started, participants ready and expected, timed_out)",
    "warmup_end": "end of the warm-up period",
    "phase_start": "a timeline phase began (name = phase)",
    "phase_end": "a timeline phase ended (name = phase)",
    "consumer_join": "a consumer connected and started consuming (name = consumer)",
    "consumer_active": "on a queue with x-single-active-consumer: the first delivery to a consumer since it "
    "joined, i.e. the broker made it the active consumer (name = consumer; detail.receive_ns: that delivery's "
    "receive time)",
    "consumer_leave": "a consumer stopped consuming (name = consumer; detail: clean, and crossed_cancel: "
    "deliveries the broker sent before it saw the basic.cancel, traced and processed like any other; reason, "
    "when the broker made it leave: channel_closed or cancelled, after which it joins again; on a "
    "single-active-consumer queue last_receive_ns, its last delivery's receive time)",
    "prefetch_change": "a phase changed a live consumer's prefetch (name = consumer, value = new prefetch; "
    "detail.crossed_cancel: deliveries that crossed the re-subscription's basic.cancel)",
    "producer_join": "a producer started publishing (name = producer)",
    "producer_leave": "a producer stopped publishing (name = producer)",
    "connection_lost": "a connection closed unexpectedly (detail has the reason; a consumer's on a "
    "single-active-consumer queue, last_receive_ns)",
    "channel_closed": "the broker closed a producer's or consumer's channel, its connection still open (name = "
    "producer or consumer; value = reply code; detail: reply_code, reply_text, and unconfirmed (a producer's "
    "publishes traced channel_closed) or unsettled (a consumer's deliveries traced unsettled, requeued by the "
    "broker)); the participant closes that connection and joins again",
    "consumer_cancelled": "the broker cancelled a consumer's subscription (basic.cancel: the queue was deleted, "
    "or its node went away; name = consumer; detail: queue, buffered): it processes and acks what it holds, "
    "then joins again",
    "queue_recreated": "a consumer found the run's queue gone (404 on basic.consume: deleted during the run) and "
    "declared the topology again (name = queue; value = its depth then; detail: the broker's reply). Messages "
    "that reached the broker before it and were never acked count as lost_with_queue",
    "consumer_crash": "a consumer crashed on the timeline (leave: crash): dropped its TCP connection without "
    "closing (name = consumer, value = deliveries it held; detail: unacked, in_hand = the "
    "id processed but not acked; on a single-active-consumer queue last_receive_ns)",
    "connection_blocked": "the broker blocked a producer's connection (a memory or disk alarm; "
    "name = producer, detail has the reason)",
    "connection_unblocked": "the broker unblocked a producer's connection (name = producer)",
    "publish_returned": "the broker returned a mandatory publish no queue took (name = message id; "
    "detail has the reply code and text)",
    "participant_error": "a producer or consumer failed; it retries after a pause (detail has the error)",
    "internal_error": "a part of the load generator failed: one of its long-lived greenlets raised and the run "
    "was ended at once (name = the greenlet, e.g. drain_monitor; detail: error, traceback, process)",
    "broker_restart": "the broker came back without the run's in-memory state (it restarted): the topology "
    "was declared again (name = queue; value = its depth then; detail: down_since_ns, queue_durable, depth_after). "
    "Messages that reached the broker before it and were never acked count as lost_with_queue",
    "drain_start": "publishing stopped; consumers drain what is left",
    "drain_end": "drain finished or timed out (detail says which)",
    "broker_depth": "messages ready in the queue (name = queue, value = depth)",
    "queue_sample": "the run's queue sampled once a second by the declaring process (name = queue; value = "
    "messages ready; detail = unacked (from the management API, null without it), consumers, "
    "source, took_ms; ts_ns = halfway through the passive declare's round trip)",
    "network_change": "the network impairment changed (name = phase; detail = the settings now in force)",
    "network_down": "network outage began: connections cut, new ones refused (name = phase)",
    "network_up": "network outage ended (name = phase)",
    "network_reset": "established connections were reset (name = phase)",
    "proxy_stats": "delay-line self-measurement for one direction (name = direction; value = p99 error ms; "
    "detail = count, p50/p99/max error, bytes)",
    "deadletter_capture": "dead-letter capture bound (name = capture queue; detail = exchange, binding keys) or "
    "stopped (value = messages captured)",
    "queue_deleted": "queue.delete_on_end: the queue was deleted after the census (name = queue)",
    "exchange_deleted": "exchanges[].delete_on_end: the exchange was deleted at the end, after the queue "
    "(name = exchange)",
    "run_end": "a worker process finished its part of the run",
}


def columns(kind: str) -> tuple[Column, ...]:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown trace kind {kind!r}; known: {', '.join(KINDS)}") from None


def column_names(kind: str) -> list[str]:
    return [c.name for c in columns(kind)]


def arrow_schema(kind: str):
    """pyarrow schema for one trace kind, with the schema version in its metadata."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
    }
    return pa.schema(
        [pa.field(c.name, types[c.type], nullable=c.nullable) for c in columns(kind)],
        metadata={b"sojourn.schema_version": str(SCHEMA_VERSION).encode(), b"sojourn.kind": kind.encode()},
    )


def spark_schema(kind: str):
    """Spark StructType for one trace kind (Spark reads all fields as nullable)."""
    from pyspark.sql import types as T

    types = {
        "string": T.StringType(),
        "int32": T.IntegerType(),
        "int64": T.LongType(),
        "float64": T.DoubleType(),
        "bool": T.BooleanType(),
    }
    return T.StructType([T.StructField(c.name, types[c.type], True) for c in columns(kind)])


def markdown_tables() -> str:
    """The column tables of docs/traces.md, generated so the doc can not drift from the code."""
    out: list[str] = []
    for kind, cols in KINDS.items():
        out.append(f"### `{kind}` — `traces/{kind}/*.parquet`\n")
        out.append("| column | type | nullable | meaning |")
        out.append("|---|---|---|---|")
        out.extend(f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {c.doc} |" for c in cols)
        out.append("")
    for title, table in (
        ("publish outcomes", PUBLISH_OUTCOMES),
        ("delivery outcomes", DELIVERY_OUTCOMES),
        ("dead-letter reasons", DEAD_LETTER_REASONS),
        ("event kinds", EVENT_KINDS),
    ):
        out.append(f"### {title}\n")
        out.append("| value | meaning |")
        out.append("|---|---|")
        out.extend(f"| `{k}` | {v} |" for k, v in table.items())
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown_tables())
