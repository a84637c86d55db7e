"""The user's handler as a consumer's processing (docs/handlers.md): what it is given, how it is
called, and how its return value or exception becomes the delivery's outcome.

The function gets one `Message` per delivery and returns `None` or "ack" (ack), "requeue" (nack
with requeue), "discard" (nack without requeue: dead-lettered when the queue has a dead-letter
exchange) or "reject" (basic.reject without requeue). An exception settles the delivery as the
group's `on_error` says ("discard" by default, so a poison message can not loop, or "requeue"),
with the exception's type in the trace; the first few tracebacks of each process go to the log.

`mode: thread` calls it in a gevent thread pool (a real OS thread per call in flight, `threads` of
them per consumer): the consumer's greenlet waits for the result while the I/O loop goes on reading
deliveries and sending acks. `mode: inline` calls it in the consumer's greenlet, for code that only
waits through gevent (gevent.sleep, monkey-patched sockets): blocking code there would stop the
I/O loop, and with it every consumer of the process.

The handler's wall time, measured around the call in the thread that makes it, is the delivery's
processing time in the trace (`processing_ms`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from loadgen.scenario.errors import Invalid
from loadgen.scenario.handler import HandlerSpec, resolve

__all__ = ["Message", "Result", "Handler", "OUTCOMES", "TRACEBACKS_LOGGED"]

log = logging.getLogger("sojourn")

OUTCOMES = {None: "ack", "ack": "ack", "requeue": "nack_requeue", "discard": "nack_discard", "reject": "reject"}
"""A handler's return value -> the delivery's outcome (analysis.schema's DELIVERY_OUTCOMES)."""
_ON_ERROR = {"discard": "nack_discard", "requeue": "nack_requeue"}
TRACEBACKS_LOGGED = 5
"""Handler errors whose traceback each process logs; the rest are counted (trace and summary)."""


class Message(NamedTuple):
    """What a handler is given for one delivery."""

    body: bytes
    """The message body, as published."""
    properties: Any
    """pika.BasicProperties: content_type, headers, priority, message_id, timestamp, ..."""
    headers: dict
    """The headers table (an empty dict when there is none); sojourn's own are `sojourn-id` (the
    message id) and `sojourn-pub-ns` (its publish time, ns since the epoch)."""
    routing_key: str
    """The routing key it was published with."""
    exchange: str
    """The exchange it was published to ('' for the default exchange)."""
    redelivered: bool
    """The broker's redelivered flag: it was delivered before (requeued, or held by a consumer that went)."""


class Result(NamedTuple):
    outcome: str  # ack, nack_requeue, nack_discard or reject
    elapsed_ns: int  # the call's wall time
    error: str | None  # the exception's type (module.Class) when it raised
    exception: BaseException | None = None  # what it raised, for the log (written by the consumer, not the thread)


def _qualified(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


class Handler:
    """One consumer's handler: the function, and its thread pool in `thread` mode."""

    errors_logged = 0  # per process: the first TRACEBACKS_LOGGED errors log their traceback

    def __init__(self, spec: HandlerSpec, consumer: str, function: Callable[[Any], Any] | None = None):
        self.spec = spec
        self.consumer = consumer
        self.function = function if function is not None else resolve(spec)
        self._pool = None
        if spec.mode == "thread":
            from gevent.threadpool import ThreadPool

            self._pool = ThreadPool(spec.threads)

    def call(self, message: Message) -> Result:
        """Call the function on `message` (in the pool in thread mode, waiting for it cooperatively).
        An error is logged here, in the consumer's greenlet: logging takes a lock, and in this
        gevent-patched process a lock taken from the pool's threads as well as the I/O loop's can
        starve (gevent issue #1744)."""
        result = self._timed(message) if self._pool is None else self._pool.apply(self._timed, (message,))
        if result.exception is not None:
            self._log_error(result.exception)
        return result

    def _timed(self, message: Message) -> Result:
        start = time.perf_counter_ns()
        try:
            returned = self.function(message)
        except Exception as exc:  # noqa: BLE001 - the user's error, counted and settled by on_error
            elapsed = time.perf_counter_ns() - start
            return Result(_ON_ERROR[self.spec.on_error], elapsed, _qualified(exc), exc)
        elapsed = time.perf_counter_ns() - start
        outcome = OUTCOMES.get(returned) if isinstance(returned, (str, type(None))) else None
        if outcome is None:
            bad = Invalid(f"returned {returned!r}: a handler returns None, 'ack', 'requeue', 'discard' or 'reject'")
            self._log_error(bad)
            return Result(_ON_ERROR[self.spec.on_error], elapsed, "sojourn.BadHandlerReturn")
        return Result(outcome, elapsed, None)

    def _log_error(self, exc: BaseException) -> None:
        if Handler.errors_logged < TRACEBACKS_LOGGED:
            Handler.errors_logged += 1
            log.warning(
                "consumer %s: handler %s raised %s (settled as on_error: %s)%s",
                self.consumer,
                self.spec.path,
                _qualified(exc),
                self.spec.on_error,
                "; later errors are counted, not logged" if Handler.errors_logged == TRACEBACKS_LOGGED else "",
                exc_info=exc,
            )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.kill()
            self._pool = None
