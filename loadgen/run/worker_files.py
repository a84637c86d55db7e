"""The end of a run that has workers: each worker tells the master when its participants have all
left and when its traces are converted, sending the files first when it writes into a directory of
its own (another host; loadgen.run.shipping); the master waits for that before it ends the run.

Over Locust's own messaging, between a worker's `Worker` and the master's `Master`; the rest of
the run's life is loadgen.run.locust_session's.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import gevent

from loadgen.run import shipping
from loadgen.run.runtime import RunContext, worker_name

__all__ = ["Master", "Worker", "WORKERS_CONVERT_S"]

log = logging.getLogger("sojourn")

_FINISHED_MSG = "sojourn_finished"  # a worker's participants have all left
_CONVERTED_MSG = "sojourn_converted"  # a worker's traces are converted (after _FINISHED_MSG)
_FILE_MSG = "sojourn_file"  # a chunk of a worker's file, to a master that does not share its disk
WORKERS_CONVERT_S = 120.0
"""How long the master waits, once the test has stopped, for finished workers to convert their traces."""


class Master:
    """The master's side, for the run going on: which workers finished, converted their traces,
    and, writing into directories of their own, sent them whole."""

    def __init__(self) -> None:
        self.finished: set[str] = set()
        self.converted: set[str] = set()
        self.remote: set[str] = set()  # workers that write into directories of their own
        self.receiver: shipping.Receiver | None = None  # their files, written under the run directory

    def register(self, runner) -> None:
        runner.register_message(_FINISHED_MSG, lambda msg, **_kw: self.finished.add(str(msg.data)))
        runner.register_message(_CONVERTED_MSG, self._converted)
        runner.register_message(_FILE_MSG, self._file)

    def new_run(self, run_dir: str) -> None:
        self.finished, self.converted, self.remote = set(), set(), set()
        self.receiver = shipping.Receiver(run_dir)

    def worker_ready(self, worker: str, own_dir: bool) -> None:
        """A worker takes part; writing into a directory of its own, it sends its files at the end,
        and the master waits for them."""
        if own_dir:
            self.remote.add(worker)

    def wait(
        self, say: Callable[[list[str]], None], progress_every_s: float, timeout_s: float = WORKERS_CONVERT_S
    ) -> list[dict[str, Any]]:
        """Until every worker that finished the run has converted its traces and, writing into a
        directory of its own, sent them whole; at most `timeout_s` without news from any of them,
        saying every `progress_every_s` how much has come (`say`, as the run's other progress lines).
        The workers whose files are not all here, with what is missing (the closing lines then name a
        complete run directory, or say what it lacks)."""
        receiver = self.receiver
        news: tuple[int, int] = (-1, -1)  # (workers converted, bytes received) when they last changed
        last_news = told_s = time.monotonic()
        while waiting := self._still_waiting():
            now = time.monotonic()
            state = (len(self.converted), receiver.received_bytes() if receiver is not None else 0)
            if state != news:
                news, last_news = state, now
            if now - last_news > timeout_s:
                remote = sorted(waiting & self.remote)
                local = sorted(waiting - self.remote)
                if local:  # on this disk: what they spilled is there, and `sojourn analyze` converts it
                    say(
                        [
                            f"[sojourn] {len(local)} worker process(es) did not report their traces converted; "
                            "`sojourn analyze` converts what they left"
                        ]
                    )
                if remote:
                    say(
                        [
                            f"[sojourn] {len(remote)} worker(s) did not send all their traces within {timeout_s:.0f} s "
                            f"of the last news: {', '.join(remote)}; run.json names them (workers_missing)"
                        ]
                    )
                return [{"worker": w, "missing": receiver.missing(w) if receiver else []} for w in remote]
            if now - told_s >= progress_every_s:
                mb = state[1] / 1e6
                say([f"[sojourn] waiting for {len(waiting)} worker process(es)' traces ({mb:.1f} MB received)"])
                told_s = now
            gevent.sleep(0.2)
        return []

    def _still_waiting(self) -> set[str]:
        """Finished workers not yet converted, and workers writing into directories of their own
        (finished or not: one that died mid-run is waited for, then named) whose files have not all
        arrived whole."""
        receiver = self.receiver
        unconverted = self.finished - self.converted
        unsent = {w for w in self.remote if receiver is None or not receiver.complete(w)}
        return unconverted | unsent

    def _converted(self, msg, **_kwargs) -> None:
        data = msg.data if isinstance(msg.data, dict) else {"worker": msg.data, "files": None}
        worker = str(data["worker"])
        if data.get("files") is not None and self.receiver is not None:
            self.receiver.manifest(worker, data["files"])
        self.converted.add(worker)

    def _file(self, msg, **_kwargs) -> None:
        receiver = self.receiver
        if receiver is None:
            return
        try:
            receiver.chunk(str(msg.data["worker"]), msg.data)
        except (OSError, shipping.ShippingError) as exc:
            log.error("sojourn: a file from worker %s could not be written: %s", msg.data.get("worker"), exc)


class Worker:
    """A worker's side, for the run going on: where it writes, and whether it has told the master
    (and sent its files) yet."""

    def __init__(self) -> None:
        self.own_dir = False  # it writes into a directory of its own, not the master's
        self.shipped = False  # it has told the master its traces are converted (and sent them)

    def place(self, master_dir: str, run_id: str, token: str) -> str:
        """Where this worker writes the run's files: the master's run directory when it sees it (the
        same disk: --processes, a shared mount), else a directory of its own, whose files go to the
        master at the end."""
        self.shipped = False
        self.own_dir = bool(token) and not shipping.shares_run_dir(master_dir, token)
        if not self.own_dir:
            return master_dir
        local = os.path.abspath(os.path.join("runs", f"{run_id}-worker-{worker_name()}"))
        log.warning(
            "sojourn: this worker does not see the master's %s; its files go to %s and then to the master",
            master_dir,
            local,
        )
        return local

    def finished(self, runner, ctx: RunContext) -> None:
        """This worker's participants have all left (the master's shape ends the test once every
        worker has)."""
        runner.send_message(_FINISHED_MSG, ctx.worker)

    def ship_once(self, runner, ctx: RunContext) -> None:
        """Tell the master this worker's traces are converted; when it writes into a directory of its
        own, send them first, file by file (once, whichever of the run's end or test_stop comes
        first)."""
        if self.shipped:
            return
        self.shipped = True
        files: dict[str, str] | None = None
        if self.own_dir:
            files = {}
            for rel in shipping.files_to_ship(ctx.run_dir):
                for chunk in shipping.chunks(ctx.run_dir, rel):
                    runner.send_message(_FILE_MSG, {"worker": ctx.worker, **chunk})
                    gevent.sleep(0)  # the heartbeat and the master's other messages go in between
                    if "sha256" in chunk:
                        files[rel] = chunk["sha256"]
            log.warning("sojourn: sent %d files of the run to the master (a copy stays in %s)", len(files), ctx.run_dir)
        runner.send_message(_CONVERTED_MSG, {"worker": ctx.worker, "files": files})
