"""After the drain: record every message still in the broker, by id, then leave it there.

The accounting needs ids, not just a count: the census subscribes to the run's queue without
acknowledging and without a prefetch limit, so the broker streams every ready message to it at
the pace of the connection (one `basic.get` round trip per message managed 57 messages/s); each
message's id is traced as a leftover row and its body dropped. Closing the channel then requeues
them all untouched. Memory stays flat: nothing of a message is kept but its trace row, so the
census counts every message, however many: a soak's 623,623 (scenarios/soak.yaml) at about
30,000 a second. (It used to stop at 200,000 ids, and left the rest unaccounted.)
"""

from __future__ import annotations

import logging
import time

import gevent
from gevent.event import Event

from loadgen.amqp import topology
from loadgen.redact import mask_text

__all__ = ["take_census", "census_then_cleanup", "QUIET_S", "PROGRESS_EVERY_S"]

log = logging.getLogger("sojourn")

CONSUMERS_GONE_S = 10.0  # how long the census waits for the queue's consumers to go away
QUIET_S = 5.0
"""The census ends early when no message came for this long (some expired or were dead-lettered
after the depth was read)."""
PROGRESS_EVERY_S = 5.0


def take_census(ctx, limit: int | None = None) -> int:
    """Trace the ids of the messages ready in the run's queue (at most `limit`, if given: the
    census benchmark's); return the queue depth."""
    queue = ctx.scenario.queue.name
    if ctx.scenario.queue.stream:  # nothing leaves a stream; its message count is not one to read by id
        ctx.event("broker_depth", "census", queue, None, {"stream": True})
        return 0
    channel = ctx.new_channel()
    try:
        depth, consumers = topology.queue_counts(channel, queue)
        deadline = time.monotonic() + CONSUMERS_GONE_S
        while consumers and time.monotonic() < deadline:
            # After an interrupt the consumers' channels may still be closing: what they held is
            # requeued (ready again) only once they are gone, and the census counts ready messages.
            gevent.sleep(0.1)
            depth, consumers = topology.queue_counts(channel, queue)
        seen = _record_ids(ctx, channel, queue, depth if limit is None else min(depth, limit))
        if limit is not None and depth > limit:
            log.warning("census: %d messages left in %r; recorded the first %d by id", depth, queue, limit)
        ctx.event("broker_depth", "census", queue, float(depth), {"recorded": seen})
        return depth
    finally:
        if channel.is_open:
            channel.close()  # requeues everything the census was sent


def census_then_cleanup(ctx) -> tuple[int | None, str | None]:
    """The end of a run on the broker: the census, then the dead-letter capture stopped (after it:
    what expires once requeued is still read) and, with queue.delete_on_end, the queue deleted,
    only after a census that counted it. Returns the depth and, when the census failed (the broker
    gone), why, password masked (run.json's census_error); it never raises: a lost broker must not
    lose the traces that are flushed next."""
    depth = census_error = None
    try:
        depth = take_census(ctx)
    except Exception as exc:  # noqa: BLE001 - reported in run.json, the exit status and the report
        census_error = mask_text(str(exc)) or type(exc).__name__
        log.error("sojourn: census failed, messages left in the broker are not known by id: %s", census_error)
    try:
        ctx.stop_dead_letter_capture()
        if census_error is None and ctx.scenario.queue.delete_on_end:
            ctx.delete_queue()
    except Exception as exc:  # noqa: BLE001 - the traces matter more than the cleanup
        log.error("sojourn: could not stop the dead-letter capture or delete the queue: %s", mask_text(str(exc)))
    return depth, census_error


def _record_ids(ctx, channel, queue: str, wanted: int) -> int:
    """Consume (no ack) until `wanted` messages are traced as leftovers, or none came for QUIET_S."""
    if wanted <= 0:
        return 0
    seen = 0
    done = Event()

    def on_message(_channel, method, props, _body) -> None:
        nonlocal seen
        if seen >= wanted:
            return  # sent before the cancel took effect; still requeued with the others
        headers = props.headers or {}
        ctx.writer.append("leftover", (headers.get("sojourn-id"), queue, time.time_ns(), bool(method.redelivered)))
        seen += 1
        if seen >= wanted:
            done.set()

    channel.basic_qos(prefetch_count=0)
    channel.basic_consume(queue, on_message, auto_ack=False)
    started = last_progress = time.monotonic()
    before = -1
    while not done.is_set():
        if done.wait(min(QUIET_S, PROGRESS_EVERY_S)):
            break
        if seen == before:
            log.warning("census: no message for %.0f s after %d of %d in %r", QUIET_S, seen, wanted, queue)
            break
        before = seen
        if time.monotonic() - last_progress >= PROGRESS_EVERY_S:
            last_progress = time.monotonic()
            log.warning(
                "census: %d of %d messages left in %r recorded (%.0f s)", seen, wanted, queue, last_progress - started
            )
    return seen
