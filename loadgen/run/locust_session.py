"""Glue between Locust's runner events and the sojourn run in this process.

Locust fires init, test_start, test_stop and quitting in every process (local,
master, each worker); this module keeps one RunContext per process and does
each role's part: the local runner or master owns run.json, the timeline events,
warm-up and the final census; the local runner and each worker run the drain.

When the test stops (the scenario's shape has ended, Stop in the web UI, Ctrl-C) each process
converts its traces at once, not when Locust exits: under the web UI Locust goes on running.
The local runner or master then stamps the run's end, writes Locust's report and statistics
into the run directory unless --html/--csv put them elsewhere, and says where the run is and
how to analyse it (loadgen.run.finish), or analyses it (--analyze).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import gevent
from gevent.event import Event
from locust.runners import MasterRunner, WorkerRunner

from loadgen.amqp import kstamp
from loadgen.broker_help import broker_help
from loadgen.childenv import child_env
from loadgen.errors import EXIT_INTERNAL, BrokerOperationFailed, BrokerUnreachable, QueueHoldsMessages
from loadgen.netem import NetemError
from loadgen.redact import mask_text, mask_url
from loadgen.replay.sources import describe
from loadgen.rules.barrier import START_MARGIN_DISTRIBUTED_S, START_MARGIN_S, START_TIMEOUT_S, StartBarrier
from loadgen.run import finish, guarded, locust_stats, shipping, webui, worker_files
from loadgen.run.census import census_then_cleanup
from loadgen.run.deadletter import capture_warnings
from loadgen.run.locust_output import write_csv_stats, write_html_report
from loadgen.run.memory import MemorySampler, merge_into_run_json
from loadgen.run.queue_sampler import QueueSampler
from loadgen.run.runinfo import default_run_dir, update_run_json, write_run_json
from loadgen.run.runtime import RunContext, freeze_heap, worker_name

__all__ = [
    "init",
    "start",
    "stop",
    "quit",
    "after_exit",
    "context",
    "reporter",
    "all_finished",
    "FINISH_GRACE_S",
]

log = logging.getLogger("sojourn")

FINISH_GRACE_S = 30.0
PROGRESS_EVERY_S = 5.0
_READY_MSG = "sojourn_ready"  # a worker's count of ready participants, to the master (loadgen.rules.barrier)
_T0_MSG = "sojourn_t0"  # the master's t0 and start-up detail, to every worker
_FAULT_MSG = "sojourn_fault"  # a guarded greenlet of a worker failed (loadgen.run.guarded): the master ends the run


@dataclass(frozen=True)
class _Ended:
    """A run this process has ended: what the closing lines name."""

    run_id: str
    run_dir: str
    status: str
    files: tuple[str, ...]


class _State:
    environment: Any = None
    scenario: Any = None
    ctx: RunContext | None = None
    role = "local"
    ended = False
    failed = False  # the start failed (e.g. a refused declaration): no census, no deletion at the end
    fault: dict[str, str] | None = None  # the guarded greenlet whose failure ended the run (_end_on_fault)
    barrier: StartBarrier | None = None  # the run's start barrier, in the local runner or master
    sampler: QueueSampler | None = None  # queue depth once a second, in the declaring process
    memory: MemorySampler | None = None  # this process's and its children's memory (loadgen.run.memory)
    sigint: Any = None  # the SIGINT watcher (_interrupt_between_callbacks)
    closing: tuple[RunContext, Event] | None = None  # the context being (or last) closed
    warmup_over = False  # Locust's statistics were reset at the end of the warm-up
    # --run-dir / --run-id as given: start() puts each run's own in parsed_options (for the workers)
    given_run_dir = ""
    given_run_id = ""
    starts = 0
    headless = True
    analyze = False  # --analyze: run `sojourn analyze` on the run once it has ended
    driven = False  # `sojourn run` started this Locust: it says where the run is and analyses it
    runs: ClassVar[list[_Ended]] = []  # the runs this process ended, for the closing lines
    note = ""  # the web UI's line about the run (loadgen.run.webui)
    quitting = False  # Locust is exiting: the closing lines come last (after_exit), not at the stop
    metrics_port: int | None = None  # --metrics-port: the base port of the live metrics (loadgen.metrics)
    metrics_socket: Any = None  # this process's listening socket, kept for every run of the process
    master = worker_files.Master()  # the master's: which workers finished and sent their traces
    worker = worker_files.Worker()  # a worker's: where it writes, and whether it told the master


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
    opts = environment.parsed_options
    _State.given_run_dir = getattr(opts, "run_dir", "") or ""
    _State.given_run_id = getattr(opts, "run_id", "") or ""
    _State.headless = bool(getattr(opts, "headless", True))
    _State.analyze = bool(getattr(opts, "sojourn_analyze", False))
    _State.driven = finish.driven_by_sojourn_run()
    guarded.set_handler(lambda fault: _on_fault(environment, fault))
    _State.metrics_port = getattr(opts, "metrics_port", None)
    if _State.metrics_port is not None and _State.role != "worker":  # a worker's port waits for its index
        from loadgen.metrics import endpoint

        try:
            _State.metrics_socket = endpoint.listen(endpoint.port_for(_State.metrics_port, _State.role, None))
        except endpoint.MetricsPortError as exc:
            sys.stderr.write(f"error: {exc}\n")
            sys.exit(2)
    if not environment.host:  # the broker is the load's "host" (Locust's UI and report show it)
        environment.host = mask_url(scenario.broker.url)
    if _State.role == "master":
        environment.runner.register_message(_READY_MSG, _worker_ready)
        _State.master.register(environment.runner)
        environment.runner.register_message(_FAULT_MSG, lambda msg, **_kw: _end_on_fault(environment, dict(msg.data)))
    if _State.role == "worker":
        environment.runner.register_message(_T0_MSG, lambda msg, **_kw: _t0_from_master(environment, msg.data))
    if _State.role != "worker" and getattr(environment, "web_ui", None) is not None:
        webui.install(environment, scenario, _web_status)


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
    into Locust's statistics in batches (loadgen.run.locust_stats), failures through the request event."""
    return locust_stats.batcher(environment).report


def all_finished(runner) -> bool:
    ctx = _State.ctx
    if _State.role == "master":
        return runner is not None and 0 < runner.worker_count <= len(_State.master.finished)
    return ctx is not None and ctx.finished.is_set()


def start(environment) -> None:
    """test_start: set up this process's part of the run (topology, dead-letter capture, network
    proxy); the start barrier (loadgen.rules.barrier) then fixes t0 once every participant is ready."""
    opts = environment.parsed_options
    scenario = _State.scenario
    role = _State.role
    if role != "worker":
        run_dir, run_id = _next_run_place(scenario.name)
        token = shipping.new_token()
        if opts is not None:  # parsed_options travel to the workers with the spawn message
            opts.run_dir, opts.run_id, opts.sojourn_token = run_dir, run_id, token
        if role == "master":  # a worker that finds the token there writes into the directory itself
            shipping.write_token(run_dir, token)
            _State.master.new_run(run_dir)
    else:
        run_id = opts.run_id
        run_dir = _State.worker.place(opts.run_dir, run_id, getattr(opts, "sojourn_token", ""))
    _State.ended = False
    _State.failed = False
    _State.fault = None
    _State.warmup_over = False
    _State.note = ""
    opened_s = time.monotonic()
    ctx = _State.ctx = RunContext(scenario, run_dir, run_id, role, metrics_fd=_metrics_fd(environment))
    barrier = _State.barrier = StartBarrier(scenario.participant_count(), opened_s) if role != "worker" else None
    if role != "worker":
        write_run_json(
            run_dir,
            scenario,
            run_id=run_id,
            t0_ns=ctx.t0_ns,  # provisional: the start barrier writes the run's t0
            status="running",
            replay=describe(scenario, ctx.replay_traces),
            receive_stamp=kstamp.expected_source(),
        )
        where = run_dir if _State.driven else os.path.abspath(run_dir)  # `sojourn run` names it itself
        sys.stderr.write(f"[sojourn] run {run_id}: traces in {where}/traces\n")
        for warning in capture_warnings(scenario):
            sys.stderr.write(f"warning: {warning}\n")
    try:
        ctx.declare_topology(purge=role != "worker")
        if role != "worker":  # the process that purges the queue also captures its dead-letters
            ctx.start_dead_letter_capture(purge=True)
        if role != "master":  # each process that runs participants has its own network proxy
            ctx.start_netem()
    except (BrokerUnreachable, BrokerOperationFailed, QueueHoldsMessages, NetemError) as exc:
        _fail(environment, exc)
        return
    freeze_heap()  # set up: keep the collector from walking all of it mid-run
    if role == "worker":
        ctx.on_ready = lambda ready: environment.runner.send_message(
            _READY_MSG, {"worker": ctx.worker, "ready": ready, "own_dir": _State.worker.own_dir}
        )
        guarded.spawn("finish_reporter", _report_finished, environment, ctx)
    elif barrier is not None:
        ctx.on_ready = lambda ready: barrier.report("local", ready)
        guarded.spawn("start_waiter", _start_when_ready, environment, ctx, barrier)


def _metrics_fd(environment) -> int | None:
    """The live metrics' listening socket (--metrics-port), bound at a worker's first run, where
    its port comes from the index the master gave it; a worker whose port is taken runs without."""
    if _State.metrics_port is None:
        return None
    if _State.metrics_socket is None and _State.role == "worker":
        from loadgen.metrics import endpoint

        port = endpoint.port_for(_State.metrics_port, "worker", environment.runner.worker_index)
        try:
            _State.metrics_socket = endpoint.listen(port)
        except endpoint.MetricsPortError as exc:
            _State.metrics_port = None
            log.warning("sojourn: worker %s serves no live metrics: %s", worker_name(), exc)
            return None
    return _State.metrics_socket.fileno()


def _worker_ready(msg, **_kwargs) -> None:
    _State.master.worker_ready(str(msg.data["worker"]), bool(msg.data.get("own_dir")))
    if _State.barrier is not None:
        _State.barrier.report(str(msg.data["worker"]), int(msg.data["ready"]))


def _start_when_ready(environment, ctx: RunContext, barrier: StartBarrier) -> None:
    """The local runner's or master's side of the start barrier: wait until every participant is
    ready (or START_TIMEOUT_S), fix t0 a margin ahead, tell the workers, and start the clock."""
    told_s = time.monotonic()
    while not barrier.complete() and not ctx.stopping.is_set():
        now_s = time.monotonic()
        if barrier.timed_out(now_s):
            log.warning(
                "sojourn: only %d of %d participants were ready after %.0f s; starting with them "
                "(the others retry and join late)",
                barrier.ready,
                barrier.expected,
                START_TIMEOUT_S,
            )
            break
        if now_s - told_s >= PROGRESS_EVERY_S:
            sys.stderr.write(barrier.progress(now_s) + "\n")
            told_s = now_s
        gevent.sleep(0.01)
    if ctx.stopping.is_set():
        return
    margin_s = START_MARGIN_DISTRIBUTED_S if _State.role == "master" else START_MARGIN_S
    t0_ns = time.time_ns() + int(margin_s * 1e9)
    detail = barrier.detail(time.monotonic() + margin_s)
    if _State.role == "master":
        environment.runner.send_message(_T0_MSG, {"t0_ns": t0_ns, "detail": detail})
    update_run_json(ctx.run_dir, t0_ns=t0_ns, start_barrier=detail)
    _begin(environment, ctx, t0_ns, detail)


def _t0_from_master(environment, data) -> None:
    ctx = _State.ctx
    if ctx is not None and not ctx.started.is_set() and not _State.failed:
        _begin(environment, ctx, int(data["t0_ns"]), dict(data["detail"]))


def _begin(environment, ctx: RunContext, t0_ns: int, detail: dict) -> None:
    """t0 is fixed: start the clock and what runs on it in this process."""
    try:
        ctx.fix_t0(t0_ns, detail)
    except NetemError as exc:
        _fail(environment, exc)
        return
    role = _State.role
    if role != "worker":  # slow-consumer detection: docs/slow-consumers.md
        _State.sampler = QueueSampler(ctx).start()
    name = "worker-" + ctx.worker if role == "worker" else role
    _State.memory = MemorySampler(name, ctx.elapsed_s)
    guarded.spawn("memory_sampler", _State.memory.run, ctx.stopping.wait)
    if role != "master":
        ctx.start_drain_monitor()
    if role != "worker":
        guarded.spawn("timeline", _timeline, environment, ctx)
        guarded.spawn("progress", _progress, environment, ctx)


def _next_run_place(scenario_name: str) -> tuple[str, str]:
    """This start's run directory and run id: --run-dir / --run-id, else runs/<time>-<name> and
    its name. A second test in one Locust session (Start again in the web UI) gets a directory of
    its own: the given one with -2, -3, ... appended, or a new time stamp."""
    _State.starts += 1
    suffix = f"-{_State.starts}" if _State.starts > 1 else ""
    given = _State.given_run_dir.rstrip("/")
    run_dir = f"{given}{suffix}" if given else default_run_dir(scenario_name)
    run_id = f"{_State.given_run_id}{suffix}" if _State.given_run_id else os.path.basename(run_dir)
    return run_dir, run_id


def _fail(environment, exc: Exception) -> None:
    code = 3 if isinstance(exc, BrokerUnreachable) else 2
    sys.stderr.write(f"error: {mask_text(str(exc))}\n")
    if isinstance(exc, BrokerUnreachable):  # what to do about it: start a broker, fix the user, the vhost, TLS
        sys.stderr.write(f"{broker_help(exc)}\n")
    environment.process_exit_code = code
    _State.failed = True
    if _State.role != "worker" and _State.ctx is not None:
        update_run_json(_State.ctx.run_dir, status="failed", error=mask_text(str(exc)))
    gevent.spawn_later(0, environment.runner.quit)


def _on_fault(environment, fault: guarded.Fault) -> None:
    """A guarded greenlet of this process raised (loadgen.run.guarded; the guard logged its traceback):
    an `internal_error` event in the run's traces, then the run ends (a worker asks its master to)."""
    ctx = _State.ctx
    process = f"{_State.role} process {ctx.worker if ctx is not None else worker_name()}"
    if ctx is not None:
        ctx.event(
            "internal_error",
            "runner",
            fault.part,
            detail={"error": fault.error, "traceback": fault.traceback, "process": process},
        )
    report = {"part": fault.part, "process": process, "error": fault.error}
    if _State.role == "worker":
        environment.runner.send_message(_FAULT_MSG, report)
    else:
        _end_on_fault(environment, report)


def _end_on_fault(environment, report: dict[str, str]) -> None:
    """The local runner or master: a guarded greenlet failed here or in a worker (`report`: its part,
    process and error). The first one ends the run at once, as a stopped test ends (every user stops,
    then the census and the traces, stop()), with run.json status `failed` and exit status 6."""
    if _State.fault is not None or _State.failed:
        return  # the run is already ending (or never started: that error and its exit status stand)
    _State.fault = report
    environment.process_exit_code = EXIT_INTERNAL
    sys.stderr.write(
        f"error: internal error: the {report['part']} greenlet of the {report['process']} failed "
        f"({report['error']}); ending the run now: run.json says status failed, exit status {EXIT_INTERNAL}. "
        "The traceback is above and in the run's events (internal_error).\n"
    )
    ctx = _State.ctx
    if ctx is None:
        return
    if _State.ended:  # after the test stopped (e.g. a worker converting its traces): run.json says so
        update_run_json(ctx.run_dir, status="failed", **_fault_fields())
        return
    gevent.spawn(_stop_on_fault, environment)


def _stop_on_fault(environment) -> None:
    """Stop the test (a master's workers first: the census counts only once their consumers are gone),
    then, headless, quit Locust; under the web UI it stays, as after Stop."""
    try:
        environment.runner.stop()
    except Exception:  # then at least Locust exits (quit stops what is left)
        log.exception("sojourn: stopping the test after an internal error failed")
    if _State.headless:
        environment.runner.quit()


def _fault_fields() -> dict[str, Any]:
    """run.json's account of the fault that ended the run: `error` in words, `internal_error` by field."""
    f = _State.fault
    if f is None:
        return {}
    return {
        "error": f"internal error: the {f['part']} greenlet of the {f['process']} failed: {f['error']}",
        "internal_error": dict(f),
    }


def _report_finished(environment, ctx: RunContext) -> None:
    """A worker whose participants have all left tells the master (its shape ends the test once
    every worker has), then converts its traces and says so (the master waits for that)."""
    ctx.finished.wait()
    locust_stats.flush(environment)
    send_stats = getattr(environment.runner, "_send_stats", None)  # the last results, before the master ends
    if send_stats is not None:
        send_stats()
    _State.worker.finished(environment.runner, ctx)
    _close(ctx)
    _State.worker.ship_once(environment.runner, ctx)


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
            locust_stats.batcher(environment).flush()  # warm-up results go before the reset, not after
            environment.runner.stats.reset_all()
            _State.warmup_over = True
        sys.stderr.write(f"[sojourn] t={at_s:.0f}s {kind.replace('_', ' ')}: {name}\n")


def _progress(environment, ctx: RunContext) -> None:
    duration = ctx.scenario.run.duration_s
    warmup = ctx.scenario.run.warmup_s
    while not ctx.stopping.wait(PROGRESS_EVERY_S):
        t = ctx.elapsed_s()
        stats = environment.runner.stats
        by_type: dict[str, int] = {}
        for (_name, method), entry in stats.entries.items():
            by_type[method] = by_type.get(method, 0) + entry.num_requests
        where = f"{t:5.0f}s/{duration:.0f}s phase={ctx.scenario.phase_at(ctx.scenario.in_run(t))}"
        if ctx.draining.is_set() or t >= duration:
            where = f"{t:5.0f}s draining"
        c = ctx.counters
        buffered = sum(getattr(p, "buffered", lambda: 0)() for p in ctx.participants)
        local = f" published={c['published']} acked={c['acked']} buffered={buffered}" if _State.role == "local" else ""
        sys.stderr.write(
            f"[sojourn] {where} publish={by_type.get('publish', 0)} "
            f"consume={by_type.get('consume', 0)} {finish.progress_scope(warmup, _State.warmup_over)}{local}\n"
        )


def stop(environment) -> None:
    """test_stop: users have stopped. The local runner or master takes the census and stamps the
    run's end; every process converts its traces (see the module's docstring)."""
    ctx = _State.ctx
    if ctx is None or _State.ended:
        return
    stopped_ns = time.time_ns()  # the run's end: the test stopped (census and conversion follow)
    _State.ended = True
    drained = ctx.finished.is_set() or (_State.role == "master" and all_finished(environment.runner))
    ctx.stopping.set()
    if _State.role == "worker":
        _write_memory(ctx)
        _close(ctx)
        _State.worker.ship_once(environment.runner, ctx)
        return
    if _State.failed:
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
    status = "failed" if _State.fault is not None else "completed" if drained else "interrupted"
    # census_error (docs/summary.md, `run`): the leftovers are not known, so messages still in the
    # broker would count as unaccounted; the command's exit status and the report say so.
    update_run_json(
        ctx.run_dir,
        status=status,
        broker_depth_at_end=depth,
        census_error=census_error,
        ended_ns=stopped_ns,
        **_fault_fields(),
    )
    _State.note = "converting the traces"
    _write_memory(ctx)
    _close(ctx)
    files = ["traces/", "run.json", *_write_locust_outputs(environment, ctx.run_dir)]
    if _State.role == "master":
        missing = _State.master.wait(_say, progress_every_s=PROGRESS_EVERY_S)
        if missing:
            update_run_json(ctx.run_dir, workers_missing=missing)
    if not _State.driven:  # `sojourn run` merges once every process of the run has exited
        merge_into_run_json(ctx.run_dir)
    ended = _Ended(ctx.run_id, ctx.run_dir, status, tuple(files))
    _State.runs.append(ended)
    _State.note = f"run {status}; analyze it with: {finish.analyze_command(ctx.run_dir)}"
    if not _State.headless and not _State.driven and not _State.quitting:  # Locust goes on: say it now
        _say(finish.finish_lines(ended.run_id, ended.run_dir, ended.status, list(ended.files)))
        if _State.analyze:
            gevent.spawn(_analyze_in_background, ended.run_dir)


def _write_memory(ctx: RunContext) -> None:
    """This process's memory samples, the last one taken now, into RUN_DIR/memory/ (once)."""
    sampler, _State.memory = _State.memory, None
    if sampler is None:
        return
    try:
        sampler.sample()
        sampler.write(ctx.run_dir)
    except OSError as exc:
        log.error("sojourn: could not write the memory samples into %s: %s", ctx.run_dir, exc)


def _close(ctx: RunContext) -> None:
    """ctx.close() once (the trace writer converts what it spilled); a second caller waits for the first."""
    closing = _State.closing
    if closing is not None and closing[0] is ctx:
        closing[1].wait()
        return
    done = Event()
    _State.closing = (ctx, done)
    try:
        ctx.close()
    finally:
        done.set()


def _write_locust_outputs(environment, run_dir: str) -> list[str]:
    """Locust's HTML report and CSV statistics into the run directory, unless --html / --csv
    name where Locust itself writes them (as `sojourn run` does); the names written."""
    opts = environment.parsed_options
    out = finish.locust_outputs(run_dir, getattr(opts, "html_file", None), getattr(opts, "csv_prefix", None))
    written: list[str] = []
    locust_stats.flush(environment)  # the last results: this listener may run before the batcher's
    try:
        if out.write_html:
            write_html_report(environment, out.html)
            written.append(os.path.basename(out.html))
        if out.write_csv:
            written += [os.path.basename(p) for p in write_csv_stats(environment, out.csv_prefix)]
    except Exception as exc:  # noqa: BLE001 - the traces are what matters; say what is missing
        log.error("sojourn: could not write Locust's report into %s: %s", run_dir, exc)
    return written


def _say(lines: list[str]) -> None:
    sys.stderr.write("".join(f"{line}\n" for line in lines))
    sys.stderr.flush()


def _web_status() -> dict[str, str]:
    """The web UI's panel: the run directory of the run going on or last ended (before the first
    Start: where it will be) and a line about it."""
    ctx = _State.ctx
    if ctx is not None:
        return {"run_dir": os.path.abspath(ctx.run_dir), "message": _State.note or "running"}
    if _State.given_run_dir:
        return {"run_dir": os.path.abspath(_State.given_run_dir), "message": ""}
    name = _State.scenario.name if _State.scenario is not None else "scenario"
    planned = os.path.join(os.path.abspath("runs"), f"<UTC time of Start>-{name}")
    return {"run_dir": planned, "message": "named when you press Start"}


def _analysis(run_dir: str) -> int:
    """`sojourn analyze RUN_DIR` in a child process, its output on this terminal; its exit status."""
    _say([f"[sojourn] analyzing: {finish.analyze_command(run_dir)}"])
    return subprocess.call(finish.analyze_argv(run_dir), stdin=subprocess.DEVNULL, env=child_env())


def _analyze_in_background(run_dir: str) -> None:
    """--analyze under the web UI: the analysis of the run that just ended, while Locust goes on."""
    _State.note = "analyzing the run (sojourn analyze; its output is on Locust's terminal)"
    code = _analysis(run_dir)
    report = os.path.join(os.path.abspath(run_dir), "report.html")
    _State.note = f"analyzed (exit status {code}): {report}" if os.path.isfile(report) else f"analysis failed ({code})"


def _stop_sampler() -> None:
    sampler, _State.sampler = _State.sampler, None
    if sampler is not None:
        sampler.stop()


def quit(environment) -> None:  # noqa: A001 - mirrors Locust's event name
    ctx = _State.ctx
    if ctx is None:
        return
    _State.quitting = True
    if not _State.ended and not _State.failed and _State.role != "worker" and environment.runner is not None:
        # Ctrl-C under the web UI: Locust quits before it stops the test. Stop it first, so the run
        # ends as any stopped test does (census, traces, Locust's report, the closing lines).
        try:
            environment.runner.stop()
        except Exception as exc:  # noqa: BLE001 - then at least mark it interrupted below
            log.error("sojourn: stopping the test failed: %s", exc)
    _stop_sampler()
    if not _State.ended and not _State.failed and _State.role != "worker":
        try:
            status = "failed" if _State.fault is not None else "interrupted"
            update_run_json(ctx.run_dir, status=status, ended_ns=time.time_ns(), **_fault_fields())
        except OSError:
            pass
    _write_memory(ctx)
    _close(ctx)


def after_exit(exit_code: int) -> None:
    """Locust's `quit` event, after its own closing statistics: the last lines say where each run
    of this process is and how to analyse it; with --analyze (headless) the analysis runs, and
    its failure (e.g. a failed SLO) is the exit status when Locust's own was 0."""
    if _State.role == "worker" or _State.driven or not _State.runs:
        return
    for ended in _State.runs:
        _say(finish.finish_lines(ended.run_id, ended.run_dir, ended.status, list(ended.files)))
    if _State.analyze and _State.headless:
        code = _analysis(_State.runs[-1].run_dir)
        if code and not exit_code:
            raise SystemExit(code)
