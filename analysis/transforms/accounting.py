"""Message accounting: every published message id ends in exactly one class.

First match wins, in this order (docs/summary.md, docs/discards.md): acked,
consumer_nack_discard, consumer_reject, egress_discard, publish_rejected_maxlen, publish_nacked,
unroutable, publish_failed, publish_failed_blocked, dead_lettered_maxlen, dead_lettered_expired,
dead_lettered_rejected, dead_lettered_delivery_limit, left_in_broker, not_yet_read,
dropped_delivery_limit, channel_closed, connection_lost, lost_with_queue, unaccounted. On a stream
`acked` and `not_yet_read` follow each consumer group (transforms.streams). All counts are exact (`count`,
never an approximate distinct count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, functions as F

from analysis.cube import Projection
from analysis.run_file import queue_arguments

from ._common import HELD_OUTCOMES, Transform, is_acked
from .streams import StreamGroup, expected_bits, read_bit
from .warmup import looks_up

__all__ = [
    "ACCOUNT_CLASSES",
    "DISCARD_CLASSES",
    "DEAD_LETTER_CLASSES",
    "message_facts",
    "classify",
    "ledger",
    "id_projections",
    "accounting_totals",
    "delivery_counts",
    "rejects_at_publish",
    "drops_past_delivery_limit",
]

# x-death reason -> account class. A reason not listed here (a future broker's) is not
# taken as an explanation: the message stays unaccounted, which is loud, not wrong.
DEAD_LETTER_CLASSES = {
    "maxlen": "dead_lettered_maxlen",
    "expired": "dead_lettered_expired",
    "rejected": "dead_lettered_rejected",
    "delivery_limit": "dead_lettered_delivery_limit",
}

ACCOUNT_CLASSES = (
    "acked",
    "consumer_nack_discard",
    "consumer_reject",
    "egress_discard",
    "publish_rejected_maxlen",
    "publish_nacked",
    "unroutable",
    "publish_failed",
    "publish_failed_blocked",
    *DEAD_LETTER_CLASSES.values(),
    "left_in_broker",
    "not_yet_read",
    "dropped_delivery_limit",
    "channel_closed",
    "connection_lost",
    "lost_with_queue",
    "unaccounted",
)
# The first four are the original keys of summary.json's messages.discarded, in their order.
DISCARD_CLASSES = (
    "publish_nacked",
    "publish_failed",
    "consumer_nack_discard",
    "connection_lost",
    "publish_rejected_maxlen",
    "unroutable",
    "publish_failed_blocked",
    *DEAD_LETTER_CLASSES.values(),
    "egress_discard",
    "lost_with_queue",
    "channel_closed",
    "consumer_reject",
    "dropped_delivery_limit",
)

# x-overflow values with which a full queue makes the broker nack the publish.
_REJECTING_OVERFLOW = ("reject-publish", "reject-publish-dlx")

# Written to the socket but never confirmed: lost if the producer's connection died afterwards.
_UNCONFIRMED = ("unconfirmed", "sent")

_REACHED_BROKER = ("confirmed", "sent", "unconfirmed", "channel_closed")

# message_facts: what a row of the union says of its message, as bits of one int (`_bits`). The
# grouping by id ORs them, so the outcome strings stay out of the shuffle.
_PUBLISHED, _CONFIRMED, _NACKED, _FAILED, _BLOCKED, _RETURNED, _REACHED = (1 << i for i in range(7))
_ACKED, _NACK_DISCARD, _EGRESS_DISCARD, _PROCESSED, _HEADLESS, _HELD, _LEFT, _REQUEUED = (1 << i for i in range(7, 15))
_CHANNEL_CLOSED = 1 << 15  # publish outcome channel_closed (added after the others)
_REJECTED = 1 << 16  # delivery outcome reject (trace schema 6)
_PUBLISH_FLAGS = (
    ("_nacked", _NACKED),
    ("_failed", _FAILED),
    ("_blocked", _BLOCKED),
    ("_returned", _RETURNED),
    ("_reached", _REACHED),
    ("_channel_closed", _CHANNEL_CLOSED),
)
_DELIVERY_FLAGS = (
    ("_acked", _ACKED),
    ("_nack_discard", _NACK_DISCARD),
    ("_egress_discard", _EGRESS_DISCARD),
    ("_headless", _HEADLESS),
    ("_held", _HELD),
    ("_left", _LEFT),
    ("_requeued", _REQUEUED),
    ("_rejected", _REJECTED),
)


def _bits(always: int, *conditions: tuple[Column, int]) -> Column:
    """`always` with the bit of each condition that holds (a null condition sets no bit)."""
    flags = F.lit(always)
    for condition, bit in conditions:
        flags = flags.bitwiseOR(F.when(condition, F.lit(bit)).otherwise(F.lit(0)))
    return flags


def rejects_at_publish(scenario: object) -> bool:
    """True when the queue's `x-overflow` (run.json's resolved `scenario.queue.arguments`)
    makes a full queue nack publishes: a nack is then the overflow, not a broker error."""
    return queue_arguments(scenario).get("x-overflow") in _REJECTING_OVERFLOW


def drops_past_delivery_limit(scenario: object) -> bool:
    """True when the queue (run.json's resolved `scenario.queue`) has an `x-delivery-limit`: the
    broker then dead-letters, or without a dead-letter exchange drops, a message returned to it
    more often than that (a quorum queue's rule)."""
    return queue_arguments(scenario).get("x-delivery-limit") is not None


def message_facts(
    deliveries: DataFrame,
    leftovers: DataFrame,
    dead_letters: DataFrame | None = None,
    losses: Mapping[str, int] | None = None,
    stream: Sequence[StreamGroup] | None = None,
) -> Transform:
    """Applied to publishes: one row per message id found in any of the traces (published,
    delivered, left in the broker or dead-lettered), from one grouping by message id over the
    union of the four kinds (one shuffle, where a join per kind would take four).

    Columns: message_id; from its publish rows `_publishes` (how many), `_confirms` (how many were
    confirmed), `confirmed`, the outcome
    flags `_nacked`, `_failed`, `_blocked`, `_returned`, `_reached`, `_channel_closed`, `_unconfirmed_ns` (latest
    publish that was sent but never confirmed), `_lost_ns` (the last connection loss its
    producer traced: `losses`, the last `connection_lost` event per producer, events.accounting),
    `priority` (first non-null),
    `_pub_intended_ns` / `_pub_publish_ns` (earliest); from its deliveries `_acked`,
    `_nack_discard`, `_egress_discard`, `_acks` (acked deliveries), `_processed` (deliveries
    whose processing ended), `_headless` (a delivery without the publish-time header), `_held`
    (a delivery a crashed or unsettled consumer held: HELD_OUTCOMES) and `_requeued` (a delivery was
    nack-requeued); `_left` (a leftover row)
    and `_dead_code` (the DEAD_LETTER_CLASSES index of the reason of its earliest dead-letter
    capture; an unknown reason is -1). Rows without an id are left out. Each row of the union carries
    what it says of its message as bits of one int and only its own kind's times: the flags
    are one `bit_or` per id and the counts count bits (11 aggregates, no outcome string in the
    shuffle). Every aggregate keeps a fixed-width buffer, so Spark groups by hashing instead
    of sorting the rows.

    On a stream (`stream`: its consumer groups, transforms.streams) also `_read_groups` (the groups
    that acked it, a bit each), `_offset` (its stream offset) and `_expected` (the groups that read
    it); `_acks` and `_processed` then count one per group, so that more than one is a group acking
    it twice, as it is a message acked twice elsewhere.
    """

    def _facts(publishes: DataFrame) -> DataFrame:
        outcome = F.col("outcome")

        def rows(frame: DataFrame, flags: Column, *columns: Column | str) -> DataFrame:
            return frame.where(F.col("message_id").isNotNull()).select("message_id", flags.alias("_bits"), *columns)

        lost = (
            F.create_map(*[F.lit(x) for item in sorted(losses.items()) for x in item])[F.col("producer")]
            if losses
            else F.lit(None).cast("long")
        )
        reason = F.col("reason")
        dead_code = F.lit(-1)
        for i, name in reversed(list(enumerate(DEAD_LETTER_CLASSES))):
            dead_code = F.when(reason == name, F.lit(i)).otherwise(dead_code)
        publish_bits = _bits(
            _PUBLISHED,
            (outcome == "confirmed", _CONFIRMED),
            (outcome == "nacked", _NACKED),
            (outcome == "failed", _FAILED),
            (outcome == "blocked_timeout", _BLOCKED),
            (outcome == "returned", _RETURNED),
            (outcome.isin(*_REACHED_BROKER), _REACHED),
            (outcome == "channel_closed", _CHANNEL_CLOSED),
        )
        delivery_bits = _bits(
            0,
            (is_acked(), _ACKED),
            (outcome == "nack_discard", _NACK_DISCARD),
            (outcome == "egress_discard", _EGRESS_DISCARD),
            (F.col("end_ns").isNotNull(), _PROCESSED),
            (F.col("publish_ns").isNull(), _HEADLESS),
            (outcome.isin(*HELD_OUTCOMES), _HELD),
            (outcome == "nack_requeue", _REQUEUED),
            (outcome == "reject", _REJECTED),
        )
        union = rows(
            publishes,
            publish_bits,
            F.when(outcome.isin(*_UNCONFIRMED), F.col("publish_ns")).alias("_unconfirmed_ns"),
            lost.alias("_lost_ns"),
            "priority",
            "intended_ns",
            "publish_ns",
        )
        per_group = (read_bit(stream).alias("_group_bit"), "stream_offset") if stream is not None else ()
        union = union.unionByName(rows(deliveries, delivery_bits, *per_group), allowMissingColumns=True)
        union = union.unionByName(rows(leftovers, F.lit(_LEFT)), allowMissingColumns=True)
        if dead_letters is not None:
            union = union.unionByName(
                rows(dead_letters, F.lit(0), dead_code.alias("_dead_code"), "received_ns"), allowMissingColumns=True
            )
        else:
            union = union.withColumns({"_dead_code": F.lit(None).cast("int"), "received_ns": F.lit(None).cast("long")})
        bits = F.col("_bits")

        def counted(bit: int) -> Column:
            return F.count_if(bits.bitwiseAND(bit) != 0)

        def has(bit: int) -> Column:
            return F.col("_flags").bitwiseAND(bit) != 0

        grouped = union.groupBy("message_id").agg(
            F.bit_or(bits).alias("_flags"),
            counted(_PUBLISHED).alias("_publishes"),
            counted(_CONFIRMED).alias("_confirms"),
            counted(_ACKED).alias("_acks"),
            counted(_PROCESSED).alias("_processed"),
            F.max("_unconfirmed_ns").alias("_unconfirmed_ns"),
            F.max("_lost_ns").alias("_lost_ns"),
            F.first("priority", ignorenulls=True).alias("priority"),
            F.min("intended_ns").alias("_pub_intended_ns"),
            F.min("publish_ns").alias("_pub_publish_ns"),
            F.min_by("_dead_code", "received_ns").alias("_dead_code"),
            *(
                (F.bit_or("_group_bit").alias("_read_groups"), F.min("stream_offset").alias("_offset"))
                if stream is not None
                else ()
            ),
        )
        if stream is not None:
            # one per group: a message each group acked once counts 1, as a message acked once elsewhere
            extra = F.greatest(F.bit_count(F.coalesce(F.col("_read_groups"), F.lit(0).cast("long"))) - 1, F.lit(0))
            grouped = grouped.withColumns(
                {
                    "_acks": F.greatest(F.col("_acks") - extra, F.lit(0)),
                    "_processed": F.greatest(F.col("_processed") - extra, F.lit(0)),
                    "_expected": expected_bits(stream, F.col("_offset"), F.col("_pub_publish_ns")),
                }
            )
        return grouped.select(
            "message_id",
            "_publishes",
            "_confirms",
            has(_CONFIRMED).alias("confirmed"),
            *[has(bit).alias(name) for name, bit in _PUBLISH_FLAGS],
            "_unconfirmed_ns",
            "_lost_ns",
            "priority",
            "_pub_intended_ns",
            "_pub_publish_ns",
            *[has(bit).alias(name) for name, bit in _DELIVERY_FLAGS[:3]],
            "_acks",
            "_processed",
            *[has(bit).alias(name) for name, bit in _DELIVERY_FLAGS[3:]],
            "_dead_code",
            *(_STREAM_FACTS if stream is not None else ()),
        )

    return _facts


_STREAM_FACTS = ("_read_groups", "_offset", "_expected")
"""A stream's facts of a message (message_facts): kept in the ledger for the stream block."""


def classify(
    events: DataFrame | None = None,
    publish_rejects: bool = False,
    restart_ns: int | None = None,
    delivery_limit: bool = False,
    stream: bool = False,
) -> Transform:
    """Applied to message_facts: one row per *published* message id with its `account` class,
    whether any of its publishes was `confirmed`, and its publish `priority`.

    Ids are unique per publish; should an id still have several publish rows (a
    retried publish), it counts as nacked or failed only if no attempt of it
    reached the broker un-nacked, so a retried message that was then lost shows up
    as unaccounted instead of hiding behind its first failure.

    `connection_lost`: a publish the broker never confirmed (outcome unconfirmed,
    or sent with confirms off), found nowhere afterwards, whose producer traced a
    `connection_lost` event at or after its publish time: the broker dropped it
    with the connection. Without such an event it stays unaccounted.

    `channel_closed`: a publish not yet confirmed when the broker closed its producer's channel
    (outcome `channel_closed`), found nowhere afterwards (not acked, dead-lettered or left): the
    broker dropped it with the channel (the publish that caused the close, and those after it).

    `lost_with_queue`: a publish that reached the broker (confirmed, or sent) no later than the
    broker's last restart or the run's queue declared again after it was deleted (`restart_ns`:
    the last `broker_restart` or `queue_recreated` event, collected by
    events.accounting.accounting_inputs), found nowhere afterwards: the broker lost it with
    its in-memory state (a non-durable queue, or a transient message) or with the deleted queue,
    or dropped it unroutable before the queue was declared again.

    A dead-lettered message is explained by the reason of its first capture (earliest
    `received_ns`: a message that cycles through dead-letter exchanges keeps the cause that
    started it). A consumer's own `nack_discard` or `reject` wins over the `rejected` dead-letter it causes;
    a publish the broker nacked wins over the `maxlen` dead-letter `reject-publish-dlx` makes of
    it. With `publish_rejects` (the queue's `x-overflow` is reject-publish or
    reject-publish-dlx) a nacked publish is `publish_rejected_maxlen` instead of `publish_nacked`.

    `stream` (message_facts was given the stream's groups): `acked` once every group that reads the
    message acked it, and `not_yet_read` (where left_in_broker stands) while one has not, if the
    broker confirmed it or some delivery of it carried its stream offset: it is in the stream.

    `dropped_delivery_limit`: with `delivery_limit` (the queue has an `x-delivery-limit`), a message
    a consumer returned to the queue (nack-requeued, or held when its channel went) that is found
    nowhere afterwards: the broker dropped it past the limit (with a dead-letter exchange it would
    have been captured as dead_lettered_delivery_limit).

    `egress_discard`: a consumer's egress class discarded a delivery of it (outcome `egress_discard`:
    acked with manual ack, or already forgotten by the broker under auto-ack) and no delivery of
    it was acked.

    `unroutable`: a mandatory publish the broker returned (outcome `returned`, or with
    confirms off a `publish_returned` event naming its id); `publish_failed_blocked`: given up
    on a blocked connection (outcome `blocked_timeout`), unless another attempt reached the broker.
    """

    def _classify(facts: DataFrame) -> DataFrame:
        return (
            facts.where(F.col("_publishes") > 0)
            .transform(_with_account(events, publish_rejects, restart_ns, delivery_limit, stream))
            .select("message_id", "account", "confirmed", "priority")
        )

    return _classify


def _with_account(
    events: DataFrame | None,
    publish_rejects: bool,
    restart_ns: int | None,
    delivery_limit: bool = False,
    stream: bool = False,
) -> Transform:
    """Add `account` (classify's rules) to message_facts rows of published ids."""

    def _account(j: DataFrame) -> DataFrame:
        if events is not None:
            # With confirms off a returned mandatory publish stays `sent`; its event names the id.
            returned = (
                events.where(F.col("kind") == "publish_returned")
                .select(F.col("name").alias("message_id"))
                .distinct()
                .withColumn("_returned_event", F.lit(True))
            )
            j = j.join(returned, "message_id", "left")
        else:
            j = j.withColumn("_returned_event", F.lit(None).cast("boolean"))

        def flag(name: str) -> Column:
            return F.coalesce(F.col(name), F.lit(False))

        nacked = flag("_nacked") & ~flag("_reached")
        if stream:
            read, expected = F.col("_read_groups"), F.col("_expected")
            acked = F.coalesce((read != 0) & (read.bitwiseAND(expected) == expected), F.lit(False))
        else:
            acked = flag("_acked")
        account = (
            F.when(acked, "acked")
            .when(flag("_nack_discard"), "consumer_nack_discard")
            .when(flag("_rejected"), "consumer_reject")
            .when(flag("_egress_discard"), "egress_discard")
            .when(nacked, "publish_rejected_maxlen" if publish_rejects else "publish_nacked")
            .when(flag("_returned") | flag("_returned_event"), "unroutable")
            .when(flag("_failed") & ~flag("_reached"), "publish_failed")
            .when(flag("_blocked") & ~flag("_reached"), "publish_failed_blocked")
        )
        for code, account_class in enumerate(DEAD_LETTER_CLASSES.values()):
            account = account.when(F.col("_dead_code") == code, account_class)
        account = account.when(flag("_left"), "left_in_broker")
        if stream:
            account = account.when(flag("confirmed") | F.col("_offset").isNotNull(), "not_yet_read")
        if delivery_limit:
            account = account.when(flag("_requeued") | flag("_held"), "dropped_delivery_limit")
        account = account.when(flag("_channel_closed"), "channel_closed").when(
            F.coalesce(F.col("_lost_ns") >= F.col("_unconfirmed_ns"), F.lit(False)), "connection_lost"
        )
        if restart_ns is not None:
            account = account.when(
                flag("_reached") & (F.col("_pub_publish_ns") <= F.lit(restart_ns)), "lost_with_queue"
            )
        account = account.otherwise("unaccounted")
        return j.withColumn("account", account).drop("_returned_event")

    return _account


_LEDGER_FACTS = ("_publishes", "_confirms", "_pub_intended_ns", "_pub_publish_ns", "_headless", "_acks", "_processed")
"""The facts the blocks after the accounting read by message id (warmup.attach_measured, churn) and
summary.blocks.ledger_totals counts."""


def ledger(
    warmup_end_ns: int,
    events: DataFrame | None = None,
    publish_rejects: bool = False,
    restart_ns: int | None = None,
    delivery_limit: bool = False,
    stream: bool = False,
) -> Transform:
    """Applied to message_facts: the rows of the *notable* message ids (55,151 of a 10M-message
    synthetic run: its discards, leftovers, redeliveries, requeues and duplicates): message_id, `account`
    (classify's; null for an id that was never published), confirmed, priority and the facts of
    _LEDGER_FACTS.

    Notable: not acked (every other class, unaccounted included), never or more than once
    published, acked or processed more than once, a delivery without the publish-time header,
    a delivery a crashed or unsettled consumer held, a delivery nacked (requeued, or discarded and
    the message acked all the same), or publish times on
    both sides of the warm-up's end (`warmup_end_ns`): every id some block looks up
    (warmup.attach_measured's lookups, the unaccounted ids, churn's repeats and held messages,
    CoDel's requeue hand-offs and first drops). Every other id was
    published once and acked: summary.blocks.ledger_totals counts those from the publish trace's rows
    (id_projections).

    Where the facts of a 10M-message run were cached whole (a gigabyte, 7 s to build) and scanned
    by each block, this is a filter of the pass that groups them by id."""

    def _ledger(facts: DataFrame) -> DataFrame:
        published = F.col("_publishes") > 0
        notable = (
            ~published
            | (F.col("account") != "acked")
            | (F.col("_acks") > 1)
            | (F.col("_processed") > 1)
            | F.col("_held")
            | F.col("_requeued")
            | F.col("_nack_discard")
            | F.col("_rejected")
            | looks_up(warmup_end_ns)  # attach_measured's lookups
        )
        return (
            facts.transform(_with_account(events, publish_rejects, restart_ns, delivery_limit, stream))
            .withColumn("account", F.when(published, F.col("account")))
            .where(F.coalesce(notable, F.lit(True)))
            .select(
                "message_id", "account", "confirmed", "priority", *_LEDGER_FACTS, *(_STREAM_FACTS if stream else ())
            )
        )

    return _ledger


def id_projections() -> list[Projection]:
    """What the accounting needs of every publish (analysis.cube): `ids`, the rows with an id, keyed
    by whether the publish was confirmed ('true' / 'false'). The ids not in the ledger were each
    published once and acked: as many as these rows less the ledger's ids' own
    (summary.blocks.ledger_totals)."""
    return [Projection("ids", F.col("message_id").isNotNull(), [F.col("outcome") == "confirmed"])]


def accounting_totals(classified: DataFrame) -> DataFrame:
    """One row: published, confirmed and one count column per account class."""
    return classified.agg(
        F.count(F.lit(1)).alias("published"),
        F.count_if(F.col("confirmed")).alias("confirmed"),
        *[F.count_if(F.col("account") == c).alias(c) for c in ACCOUNT_CLASSES],
    )


def delivery_counts(deliveries: DataFrame) -> DataFrame:
    """One row: redelivered (delivery rows with the flag) and duplicates (ids acked more than once)."""
    redelivered = deliveries.agg(F.count_if(F.col("redelivered")).alias("redelivered"))
    duplicates = (
        deliveries.where(is_acked() & F.col("message_id").isNotNull())
        .groupBy("message_id")
        .agg(F.count(F.lit(1)).alias("acks"))
        .agg(F.count_if(F.col("acks") > 1).alias("duplicates"))
    )
    return redelivered.crossJoin(duplicates)
