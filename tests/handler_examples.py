"""Handlers for the tests (docs/handlers.md): each body says what the handler does with it.

`by_body`: the body names the outcome: b"ack", b"none" (returns None), b"requeue", b"discard",
b"reject", b"raise" (raises ValueError), b"bad" (returns 42, not an outcome); a body
b"sleep:<ms>:<outcome>" blocks the thread that long (time.sleep: blocking code) first. A body
produced by sojourn's producers (no such word) is acked. When $SOJOURN_TEST_HANDLER_LOG names a
file, each call's "<message id> <its own measured ns> <thread name>" is written to it when the
process exits: the test sets that beside the trace's processing time.
"""

from __future__ import annotations

import atexit
import os
import threading
import time


def by_body(message):
    start = time.perf_counter_ns()
    try:
        return _act(message.body)
    finally:
        _record(message, time.perf_counter_ns() - start)


def _act(body: bytes):
    text = body.decode("utf-8", "replace")
    if text.startswith("sleep:"):
        _, ms, text = text.split(":", 2)
        time.sleep(float(ms) / 1000)
    if text == "raise":
        raise ValueError("a poison message")
    if text == "bad":
        return 42
    if text == "none":
        return None
    if text in ("ack", "requeue", "discard", "reject"):
        return text
    return None


_CALLS: list[str] = []


def _record(message, elapsed_ns: int) -> None:
    """Keep "<message id> <ns> <thread>" for the log the test reads: a list.append (atomic, no lock,
    no I/O inside the call being timed); written once, when the process exits. In the load
    generator's process, monkey-patched by gevent, a threading.Lock would be gevent's, and file I/O
    inside the call would count against the handler's time as the test compares it."""
    if os.environ.get("SOJOURN_TEST_HANDLER_LOG"):
        _CALLS.append(f"{message.headers.get('sojourn-id')} {elapsed_ns} {threading.current_thread().name}\n")


def _write_calls() -> None:
    if _CALLS:
        with open(os.environ["SOJOURN_TEST_HANDLER_LOG"], "a", encoding="utf-8") as out:
            out.writelines(_CALLS)


if os.environ.get("SOJOURN_TEST_HANDLER_LOG"):
    atexit.register(_write_calls)


BY_ID = ("ack", "none", "requeue", "discard", "reject", "raise", "block")
"""What `by_id` does with a message, by its id (by_id_action)."""
BLOCK_MS = 20


def by_id_action(message_id: str) -> str:
    """One of BY_ID for a message id: the same in the handler and in the test that checks it."""
    return BY_ID[sum(message_id.encode()) % len(BY_ID)]


def by_id(message):
    """The action by_id_action gives the message's `sojourn-id`: ack, return None, requeue (only on
    its first delivery: redelivered, it is acked), discard, reject, raise ValueError, or block its
    thread BLOCK_MS (time.sleep) and ack."""
    start = time.perf_counter_ns()
    try:
        action = by_id_action(str(message.headers.get("sojourn-id")))
        if action == "requeue" and message.redelivered:
            return "ack"
        if action == "block":
            time.sleep(BLOCK_MS / 1000)
            return "ack"
        return _act(action.encode())
    finally:
        _record(message, time.perf_counter_ns() - start)
