"""After the drain: record every message still in the broker, by id, then leave it there.

The accounting needs ids, not just a count: each message left in the queue is
fetched with basic.get (no ack), its id traced as a leftover row, and the
channel is then closed so the broker requeues them all untouched.
"""

from __future__ import annotations

import logging
import time

import gevent

from loadgen.amqp import connection as amqp
from loadgen.amqp import topology

__all__ = ["take_census", "CENSUS_LIMIT"]

log = logging.getLogger("sojourn")

CENSUS_LIMIT = 200_000
CONSUMERS_GONE_S = 10.0  # how long the census waits for the queue's consumers to go away


def take_census(ctx, limit: int = CENSUS_LIMIT) -> int:
    """Trace the ids of the messages ready in the run's queue; return the queue depth."""
    queue = ctx.scenario.queue.name
    channel = ctx.new_channel()
    try:
        depth, consumers = topology.queue_counts(channel, queue)
        deadline = time.monotonic() + CONSUMERS_GONE_S
        while consumers and time.monotonic() < deadline:
            # After an interrupt the consumers' channels may still be closing: what they held is
            # requeued (ready again) only once they are gone, and the census counts ready messages.
            gevent.sleep(0.1)
            depth, consumers = topology.queue_counts(channel, queue)
        seen = 0
        while seen < min(depth, limit):
            got = amqp.wait_for(
                lambda cb: channel.basic_get(
                    queue, lambda _ch, got_method, got_props, _body: cb((got_method, got_props)), auto_ack=False
                ),
                f"basic.get {queue!r}",
                10.0,
                channel=channel,
            )
            method, props = got
            headers = props.headers or {}
            ctx.writer.append("leftover", (headers.get("sojourn-id"), queue, time.time_ns(), bool(method.redelivered)))
            seen += 1
            if method.message_count == 0:
                break
        if depth > limit:
            log.warning("census: %d messages left in %r; recorded the first %d by id", depth, queue, limit)
        ctx.event("broker_depth", "census", queue, float(depth), {"recorded": seen})
        return depth
    finally:
        if channel.is_open:
            channel.close()  # requeues everything the census fetched
