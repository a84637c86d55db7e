"""How a command stops: Ctrl-C (SIGINT), a service manager, CI runner or `timeout` (SIGTERM) and a
closed terminal (SIGHUP) all stop it the same way. The load stops, every process flushes its traces,
the census counts what is left in the broker, what was captured is analysed, and the exit status
says which signal it was (128 + its number: 130, 143, 129).

The load generator runs in a process group of its own (`run_locust`), so a signal sent to this
process alone (SIGTERM from systemd or `timeout`) still reaches every process of the run: it is
passed on to the group as the SIGINT the load generator takes as Ctrl-C, the first time; a second
signal stops the group at once (SIGTERM).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["STOP_SIGNALS", "stop_on_signals", "interrupted_status", "stop_run_group"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: list[int] = []


def _stop(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block each of STOP_SIGNALS raises KeyboardInterrupt, as SIGINT does by default
    (the commands handle that already), and is remembered for `interrupted_status`; the handlers
    before it are put back after it."""
    previous = {signum: signal.signal(signum, _stop) for signum in STOP_SIGNALS}
    _received.clear()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def interrupted_status() -> int:
    """The exit status of a command a signal stopped: 128 + the first signal's number (130 for
    Ctrl-C, also when the interrupt came some other way)."""
    return 128 + (_received[0] if _received else signal.SIGINT)


def stop_run_group(child: subprocess.Popen[bytes], force: bool = False) -> None:
    """Ask every process of the run started as `child` (its own process group) to stop as Ctrl-C
    does (SIGINT), or with `force` at once (SIGTERM). Nothing to do if they are gone."""
    try:
        os.killpg(child.pid, signal.SIGTERM if force else signal.SIGINT)
    except (ProcessLookupError, PermissionError):
        pass
