"""Glue between Locust's runner events and the sojourn run in this process.

Locust fires init, test_start, test_stop and quitting in every process (local,
master, each worker); this module keeps one RunContext per process and does
each role's part: the local runner or master owns run.json, the timeline events,
warm-up and the final census; the local runner and each worker run the drain.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from typing import Any, ClassVar

import gevent
from locust.runners import MasterRunner, WorkerRunner

from loadgen import reports
from loadgen.census import census_then_cleanup
from loadgen.deadletter import capture_warnings
from loadgen.errors import BrokerOperationFailed, BrokerUnreachable
from loadgen.netem import NetemError
from loadgen.queue_sampler import QueueSampler
from loadgen.redact import mask_text
from loadgen.replay.sources import describe
from loadgen.runinfo import default_run_dir, update_run_json, write_run_json
from loadgen.runtime import RunContext, freeze_heap

__all__ = ["init", "start", "stop", "quit", "context", "reporter", "all_finished", "FINISH_GRACE_S"]

log = logging.getLogger("sojourn")

FINISH_GRACE_S = 30.0
PROGRESS_EVERY_S = 5.0
LEAD_IN_S = 1.0
"""t0 (time 0 of the timeline) is this long after the run starts, so producers and consumers have
connected before the first scheduled publish: a replay's first rows are not late by the time it
takes to open a connection."""
LEAD_IN_DISTRIBUTED_S = 3.0
"""The same for a master: its workers must also get the spawn message and start their users."""
_FINISHED_MSG = "sojourn_finished"


class _State:
    environment: Any = None
    scenario: Any = None
    ctx: RunContext | None = None
    role = "local"
    finished_workers: ClassVar[set[str]] = set()
    ended = False
    failed = False  # the start failed (e.g. a refused declaration): no census, no deletion at the end
    sampler: QueueSampler | None = None  # queue depth once a second, in the declaring process
    sigint: Any = None  # the SIGINT watcher (_interrupt_between_callbacks)


def _role(runner) -> str:
    if isinstance(runner, MasterRunner):
        return "master"
    if isinstance(runner, WorkerRunner):
        return "worker"
    return "local"


def init(environment, scenario, scenario_path: str, overrides: list[str]) -> None:
    _State.environment = environment
    _State.scenario = scenario
    _State.role = _role(environment.runner)
    _State.sigint = gevent.signal_handler(signal.SIGINT, _interrupt_between_callbacks)
    if _State.role == "master":
        environment.runner.register_message(
            _FINISHED_MSG, lambda msg, **_kw: _State.finished_workers.add(str(msg.data))
        )


def _interrupt_between_callbacks() -> None:
    """Ctrl-C, as Locust handles it (KeyboardInterrupt in the main greenlet: stop the users, then
    test_stop, where the census and the trace flush run), but raised between two turns of the event
    loop. Python's own handler raises it in whatever runs when the signal lands, often pika's
    socket callback in the hub: gevent then stops that socket's watcher, and the connection never
    reads or writes again. Publishes queued on it were traced as sent but never reached the broker;
    a census whose control connection was hit waited for its timeout and found nothing."""
    gevent.get_hub().handle_system_error(KeyboardInterrupt, KeyboardInterrupt())


def context() -> RunContext:
    if _State.ctx is None:
        raise RuntimeError("the sojourn run has not started in this process")
    return _State.ctx


def reporter(environment):
    """report(request_type, name, response_time_ms, length, exception) for a producer or consumer:
    into Locust's statistics in batches (loadgen.reports), failures through the request event."""
    return reports.batcher(environment).report


def all_finished(runner) -> bool:
    ctx = _State.ctx
    if _State.role == "master":
        return runner is not None and 0 < runner.worker_count <= len(_State.finished_workers)
    return ctx is not None and ctx.finished.is_set()


def start(environment) -> None:
    opts = environment.parsed_options
    scenario = _State.scenario
    role = _State.role
    if role != "worker":
        run_dir = getattr(opts, "run_dir", "") or default_run_dir(scenario.name)
        run_id = getattr(opts, "run_id", "") or run_dir.rstrip("/").split("/")[-1]
        t0_ns: int | None = time.time_ns() + int((LEAD_IN_DISTRIBUTED_S if role == "master" else LEAD_IN_S) * 1e9)
        if opts is not None:  # parsed_options travel to the workers with the spawn message
            opts.run_dir, opts.run_id, opts.sojourn_t0_ns = run_dir, run_id, t0_ns
        _State.finished_workers = set()
    else:
        run_dir, run_id = opts.run_dir, opts.run_id
        t0_ns = getattr(opts, "sojourn_t0_ns", None)
    _State.ended = False
    _State.failed = False
    ctx = _State.ctx = RunContext(scenario, run_dir, run_id, role, t0_ns)
    if role != "worker":
        write_run_json(
            run_dir,
            scenario,
            run_id=run_id,
            t0_ns=ctx.t0_ns,
            status="running",
            replay=describe(scenario, ctx.replay_traces),
        )
        sys.stderr.write(f"[sojourn] run {run_id}: traces in {run_dir}/traces\n")
        for warning in capture_warnings(scenario):
            sys.stderr.write(f"warning: {warning}\n")
    try:
        ctx.declare_topology(purge=role != "worker")
        if role != "worker":  # the process that purges the queue also captures its dead-letters
            ctx.start_dead_letter_capture(purge=True)
            _State.sampler = QueueSampler(ctx).start()  # slow-consumer detection: docs/slow-consumers.md
        if role != "master":  # each process that runs participants has its own network proxy
            ctx.start_netem()
    except (BrokerUnreachable, BrokerOperationFailed, NetemError) as exc:
        _fail(environment, exc)
        return
    freeze_heap()  # set up: keep the collector from walking all of it mid-run
    if role != "master":
        ctx.start_drain_monitor()
    if role == "worker":
        gevent.spawn(_report_finished, environment, ctx)
    else:
        gevent.spawn(_timeline, environment, ctx)
        gevent.spawn(_progress, environment, ctx)


def _fail(environment, exc: Exception) -> None:
    code = 3 if isinstance(exc, BrokerUnreachable) else 2
    sys.stderr.write(f"error: {mask_text(str(exc))}\n")
    if isinstance(exc, BrokerUnreachable):  # what to do about it: start a broker, fix the user, the vhost, TLS
        from loadgen.commands.common import broker_help

        sys.stderr.write(f"{broker_help(exc)}\n")
    environment.process_exit_code = code
    _State.failed = True
    if _State.role != "worker" and _State.ctx is not None:
        update_run_json(_State.ctx.run_dir, status="failed", error=mask_text(str(exc)))
    gevent.spawn_later(0, environment.runner.quit)


def _report_finished(environment, ctx: RunContext) -> None:
    ctx.finished.wait()
    environment.runner.send_message(_FINISHED_MSG, ctx.worker)


def _timeline(environment, ctx: RunContext) -> None:
    """Record warm-up end and phase boundaries as events; reset Locust's stats after warm-up."""
    scenario = ctx.scenario
    marks: list[tuple[float, str, str]] = []
    if scenario.run.warmup_s > 0:
        marks.append((scenario.run.warmup_s, "warmup_end", "warmup"))
    for name, start_s, end_s in scenario.phase_windows():
        marks.append((start_s, "phase_start", name))
        marks.append((end_s, "phase_end", name))
    for at_s, kind, name in sorted(marks, key=lambda m: (m[0], m[1] != "phase_end")):
        if not ctx.sleep_until(at_s, ctx.stopping):
            return
        ctx.event(kind, "runner", name)
        if kind == "warmup_end":
            reports.batcher(environment).flush()  # warm-up results go before the reset, not after
            environment.runner.stats.reset_all()
        sys.stderr.write(f"[sojourn] t={at_s:.0f}s {kind.replace('_', ' ')}: {name}\n")


def _progress(environment, ctx: RunContext) -> None:
    duration = ctx.scenario.run.duration_s
    while not ctx.stopping.wait(PROGRESS_EVERY_S):
        t = ctx.elapsed_s()
        stats = environment.runner.stats
        by_type: dict[str, int] = {}
        for (_name, method), entry in stats.entries.items():
            by_type[method] = by_type.get(method, 0) + entry.num_requests
        where = f"{t:5.0f}s/{duration:.0f}s phase={ctx.scenario.phase_at(min(t, duration - 1e-9))}"
        if ctx.draining.is_set() or t >= duration:
            where = f"{t:5.0f}s draining"
        c = ctx.counters
        buffered = sum(getattr(p, "buffered", lambda: 0)() for p in ctx.participants)
        local = f" published={c['published']} acked={c['acked']} buffered={buffered}" if _State.role == "local" else ""
        sys.stderr.write(
            f"[sojourn] {where} publish={by_type.get('publish', 0)} "
            f"consume={by_type.get('consume', 0)} (since warm-up){local}\n"
        )


def stop(environment) -> None:
    """test_stop: users have stopped; the local runner or master takes the census."""
    ctx = _State.ctx
    if ctx is None or _State.ended:
        return
    _State.ended = True
    drained = ctx.finished.is_set() or (_State.role == "master" and all_finished(environment.runner))
    ctx.stopping.set()
    if _State.role == "worker" or _State.failed:
        # After a failed start the queue may be someone else's (a 406 on declare): counting or
        # deleting it would be wrong, and run.json keeps status "failed".
        ctx.flush_traces()
        return
    _stop_sampler()  # after the drain, before the census takes messages off the queue
    depth, census_error = census_then_cleanup(ctx)
    try:
        ctx.delete_exchanges()  # exchanges[].delete_on_end, after the queue and the dead-letter capture
    except Exception as exc:  # noqa: BLE001 - the traces matter more than the cleanup
        log.error("sojourn: could not delete the scenario's exchanges: %s", mask_text(str(exc)))
    status = "completed" if drained else "interrupted"
    # census_error (docs/summary.md, `run`): the leftovers are not known, so messages still in the
    # broker would count as unaccounted; the command's exit status and the report say so.
    update_run_json(
        ctx.run_dir, status=status, broker_depth_at_end=depth, census_error=census_error, ended_ns=time.time_ns()
    )
    ctx.flush_traces()


def _stop_sampler() -> None:
    sampler, _State.sampler = _State.sampler, None
    if sampler is not None:
        sampler.stop()


def quit(environment) -> None:  # noqa: A001 - mirrors Locust's event name
    ctx = _State.ctx
    if ctx is None:
        return
    _stop_sampler()
    if not _State.ended and not _State.failed and _State.role != "worker":
        try:
            update_run_json(ctx.run_dir, status="interrupted", ended_ns=time.time_ns())
        except OSError:
            pass
    ctx.close()
