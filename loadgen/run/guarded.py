"""The run's long-lived greenlets, guarded: one that raises ends the run instead of hanging it.

Each greenlet a run keeps going beside its users (the stats batcher, the drain monitor, the
lateness watch, the start waiter, a worker's finish reporter, the timeline, the progress line, the
trace flush, the queue and memory samplers) is started with `spawn`. When one raises, the guard logs
the exception with its traceback and hands a `Fault` (which part, the error, the traceback, all
passwords masked) to the process's fault handler: loadgen.run.locust_session records it as an
`internal_error` event in the run's traces and ends the run at once, as a stopped test ends
(census, traces, run.json status `failed`), and `sojourn run` exits with status 6
(loadgen.commands.common.EXIT_INTERNAL). Without the guard a dead drain monitor or start waiter
left `drained` or `started` unset, and the run went on until the shape's overall timeout.

A test-only hook (tests/integration/test_greenlet_fault.py; never set it otherwise):
SOJOURN_TEST_FAULT=PART[@SECONDS] makes the greenlet named PART (e.g. drain_monitor) raise
InjectedFault SECONDS after it started (at once without @), in every process of the run that
starts one.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent

from loadgen.redact import mask_text

__all__ = ["Fault", "InjectedFault", "spawn", "set_handler", "FAULT_ENV", "PARTS"]

log = logging.getLogger("sojourn")

FAULT_ENV = "SOJOURN_TEST_FAULT"
"""The test-only hook's environment variable (see the module's docstring)."""

PARTS = (
    "stats_batcher",
    "trace_flush",
    "drain_monitor",
    "lateness_watch",
    "start_waiter",
    "finish_reporter",
    "timeline",
    "progress",
    "queue_sampler",
    "memory_sampler",
)
"""Every guarded greenlet's name: the `internal_error` event's name, and what SOJOURN_TEST_FAULT names."""


@dataclass(frozen=True)
class Fault:
    """A guarded greenlet raised: `part` is its name (one of PARTS), `error` "Type: message" and
    `traceback` the formatted traceback, passwords masked in both."""

    part: str
    error: str
    traceback: str


class InjectedFault(BaseException):
    """What SOJOURN_TEST_FAULT raises: a BaseException, so that no `except Exception` on its way
    (a probe that must not kill the drain) swallows it before it reaches the guard."""


FaultHandler = Callable[[Fault], None]
_handler: FaultHandler | None = None


def set_handler(handler: FaultHandler | None) -> FaultHandler | None:
    """The process's fault handler (loadgen.run.locust_session installs it); returns the one before."""
    global _handler
    previous, _handler = _handler, handler
    return previous


def spawn(part: str, fn: Callable[..., Any], *args: Any, on_fault: FaultHandler | None = None) -> gevent.Greenlet:
    """gevent.spawn(fn, *args), guarded: an exception out of fn (not GreenletExit, the greenlet's
    kill) is logged with its traceback and passed as a Fault to `on_fault`, else to the process's
    handler (set_handler); the greenlet then ends normally."""
    assert part in PARTS, part
    return gevent.spawn(_guarded, part, fn, args, on_fault)


def _guarded(part: str, fn: Callable[..., Any], args: tuple[Any, ...], on_fault: FaultHandler | None) -> Any:
    try:
        after_s = _injected_after(part)
        if after_s is None:
            return fn(*args)
        with gevent.Timeout(after_s, InjectedFault(f"{FAULT_ENV}={os.environ.get(FAULT_ENV)}: injected fault")):
            return fn(*args)
    except gevent.GreenletExit:
        raise
    except (Exception, InjectedFault) as exc:  # noqa: BLE001 - whatever it was, the run must end, not hang
        fault = Fault(part, mask_text(f"{type(exc).__name__}: {exc}"), mask_text(traceback.format_exc()))
        log.error("sojourn: internal error: the %s greenlet failed: %s\n%s", part, fault.error, fault.traceback)
        handler = on_fault or _handler
        if handler is not None:
            try:
                handler(fault)
            except Exception:  # the fault is logged above; say that handling it failed too
                log.exception("sojourn: handling the failure of the %s greenlet failed", part)
        return None


def _injected_after(part: str) -> float | None:
    """SOJOURN_TEST_FAULT's delay for `part`: None when it does not name it; raises at once (0 s
    without @SECONDS, or a bad value) when it does."""
    value = os.environ.get(FAULT_ENV, "")
    name, _, after = value.partition("@")
    if name != part:
        return None
    delay = float(after) if after else 0.0
    if delay <= 0:
        raise InjectedFault(f"{FAULT_ENV}={value}: injected fault")
    return delay
