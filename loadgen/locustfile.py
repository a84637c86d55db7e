"""Locust entry point: `locust -f loadgen/locustfile.py --scenario scenarios/quickstart.yaml`.

Started by `sojourn run` (or sweep, nightly), it takes no --scenario: it reads the scenario the
command resolved from the run directory's run.json, and the broker URL from the environment
(loadgen.run.handoff).

Each producer and consumer of the scenario is one Locust user that runs its own
publish or consume loop (Locust schedules users, not messages); every message
still reaches Locust's statistics through the `request` event. The scenario's
duration, timeline and drain drive the run through a LoadTestShape. Works with
the web UI, `--headless`, `--processes N` and `--master`/`--worker`.

A run ends as under `sojourn run`: when the shape ends (or the test is stopped) the traces
are converted, run.json gets the time the test stopped, Locust's report and statistics go into
the run directory (locust.html, locust_*.csv; unless --html/--csv say otherwise), and the last
lines name the run directory and the `sojourn analyze` command (`--analyze` runs it). The web UI
shows the scenario and the run directory instead of the fields the scenario decides.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time

import gevent

# Locust loads this file by path; make the package importable from a plain checkout too.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from locust import LoadTestShape, User, events, task  # noqa: E402

from loadgen.redact import mask_text  # noqa: E402
from loadgen.replay.sources import load_sources  # noqa: E402
from loadgen.rules.barrier import START_TIMEOUT_S  # noqa: E402
from loadgen.rules.repeats import HeldBack  # noqa: E402
from loadgen.run import handoff, locust_session  # noqa: E402
from loadgen.scenario import ScenarioError, load_scenario  # noqa: E402
from loadgen.users.consumer import Consumer  # noqa: E402
from loadgen.users.producer import Producer  # noqa: E402

log = logging.getLogger("sojourn")
RETRY_AFTER_S = 1.0
FINISHED_IDLE_S = 1.0  # a user whose run is over here waits this long per call until Locust stops it
_RETRIES: dict[tuple[str, str], HeldBack] = {}  # (participant, error type) -> its retry warning's rate limit
# pika logs every channel open/close at INFO and a traceback for every cut connection;
# sojourn logs and traces each lost connection itself (connection_lost events).
logging.getLogger("pika").setLevel(logging.CRITICAL)


def _early_options(argv: list[str]) -> argparse.Namespace:
    """Locust imports this file before it parses options, but the User classes depend
    on the scenario, so --scenario and --set are read from the command line here."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--scenario", default=os.environ.get("SOJOURN_SCENARIO"))
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    opts, _ = parser.parse_known_args(argv)
    return opts


_HELP = any(a in ("-h", "--help", "-V", "--version") for a in sys.argv[1:])
_OPTS = _early_options(sys.argv[1:])
SCENARIO = None
try:
    SCENARIO = handoff.take_over()  # the scenario `sojourn run` resolved for this run, if it started us
    if SCENARIO is None and _OPTS.scenario:
        SCENARIO = load_scenario(_OPTS.scenario, _OPTS.overrides)
    if SCENARIO is not None:
        load_sources(SCENARIO)  # a bad replay file is an input error now, not a worker failure later
except ScenarioError as exc:
    sys.stderr.write(f"error: {exc}\n")
    sys.exit(2)
if SCENARIO is None and not _HELP:
    sys.stderr.write(
        "error: --scenario FILE is required (or set SOJOURN_SCENARIO), "
        "e.g. locust -f loadgen/locustfile.py --scenario scenarios/quickstart.yaml\n"
    )
    sys.exit(2)


@events.init_command_line_parser.add_listener
def _add_options(parser, **_kwargs):
    group = parser.add_argument_group("sojourn")
    group.add_argument(
        "--scenario", default=os.environ.get("SOJOURN_SCENARIO"), help="sojourn scenario YAML file (required)"
    )
    group.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        metavar="PATH=VALUE",
        help="override a scenario field, e.g. --set consumers.main.prefetch=51 (repeatable)",
    )
    group.add_argument("--run-dir", default="", help="where traces and run.json go (default runs/<time>-<name>)")
    group.add_argument("--run-id", default="", help="run id (default: the run directory's name)")
    group.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics while the run goes on (a run in one process "
        "and Locust's master on PORT, worker N on PORT+1+N; docs/metrics.md)",
    )
    group.add_argument(
        "--analyze",
        action="store_true",
        dest="sojourn_analyze",
        help="analyze the run (sojourn analyze RUN_DIR) once it has ended; needs the analysis extra",
    )


class SojournUser(User):
    """One producer or consumer instance; the subclasses are generated from the scenario."""

    abstract = True
    kind = ""
    group = ""

    participant = None

    @task
    def run_participant(self):
        ctx = locust_session.context()
        if ctx.stopping.is_set():
            # The run is over in this process (a worker's users all left, or the test stopped) and
            # Locust (wait_time 0) calls the task straight back until the master stops the test:
            # wait instead of spinning through the participant's start once more. A second, so a
            # graceful stop (--stop-timeout) still ends the task soon.
            gevent.sleep(FINISHED_IDLE_S)
            return
        if self.participant is None or self.participant.ctx is not ctx:
            slot = ctx.claim_slot(self.kind, self.group, SCENARIO.max_count(self.kind, self.group))
            cls = Producer if self.kind == "producers" else Consumer
            self.participant = cls(ctx, self.group, slot, locust_session.reporter(self.environment))
        participant = self.participant
        ctx.participants.append(participant)
        try:
            if not ctx.started.is_set():  # the start barrier (loadgen.rules.barrier): connected and subscribed
                participant.prepare()
            if ctx.ready_to_start(participant):  # waits for t0; False if the run stopped first
                participant.run()
        except Exception as exc:  # noqa: BLE001 - trace it, back off, and let Locust call us again
            ctx.event(
                "participant_error",
                participant.name,
                participant.name,
                detail={"error": mask_text(f"{type(exc).__name__}: {exc}")},
            )
            # Every second while the broker is down: the first said at once, then once a minute
            # with the count held back (every failure is a participant_error event in the traces).
            repeats = _RETRIES.setdefault((participant.name, type(exc).__name__), HeldBack())
            line = repeats.line(
                f"sojourn: {participant.name} failed: {mask_text(str(exc))}; retrying every {RETRY_AFTER_S:.0f} s",
                time.monotonic(),
            )
            if line:
                log.error("%s", line)
            ctx.stopping.wait(RETRY_AFTER_S)
            return
        finally:
            ctx.participant_finished(participant)
        ctx.stopping.wait()  # done: idle until Locust stops the run


def _class_name(kind: str, group: str, index: int) -> str:
    return ("Producer_" if kind == "producers" else "Consumer_") + re.sub(r"\W", "_", group) + f"_{index}"


# One User class per producer or consumer (fixed_count 1), not one per group: Locust hands the
# users of a run to its worker processes one by one, in turn, and with one class per group it
# interleaved the groups' users so that, with --processes 2, every producer of a group went to
# one worker and every consumer to the other. One class each, a group's users come one after
# another and are spread over the workers like the rest (docs/replay.md, "How late, at what rate").
USER_COUNT = 0
if SCENARIO is not None:
    USER_COUNT = SCENARIO.participant_count()
    for _kind, _groups in SCENARIO.groups():
        for _g in _groups:
            for _i in range(SCENARIO.max_count(_kind, _g.name)):
                globals()[_class_name(_kind, _g.name, _i)] = type(
                    _class_name(_kind, _g.name, _i),
                    (SojournUser,),
                    {"fixed_count": 1, "kind": _kind, "group": _g.name, "abstract": False, "__module__": __name__},
                )


class SojournShape(LoadTestShape):
    """Holds every user for the run, then ends once each process has drained."""

    def tick(self):
        if SCENARIO is None or USER_COUNT == 0:
            return None
        run = SCENARIO.run
        if locust_session.all_finished(self.runner):
            return None
        if self.get_run_time() > START_TIMEOUT_S + run.duration_s + run.drain_timeout_s + locust_session.FINISH_GRACE_S:
            log.warning("sojourn: the run did not finish draining in time; stopping")
            return None
        return USER_COUNT, max(USER_COUNT, 1)


@events.init.add_listener
def _on_init(environment, **_kwargs):
    if SCENARIO is None:
        return
    locust_session.init(environment, SCENARIO, _OPTS.scenario, _OPTS.overrides)


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs):
    if SCENARIO is not None:
        locust_session.start(environment)


@events.test_stop.add_listener
def _on_test_stop(environment, **_kwargs):
    if SCENARIO is not None:
        locust_session.stop(environment)


@events.quitting.add_listener
def _on_quitting(environment, **_kwargs):
    if SCENARIO is not None:
        locust_session.quit(environment)


@events.quit.add_listener
def _on_quit(exit_code=0, **_kwargs):
    if SCENARIO is not None:
        locust_session.after_exit(exit_code)
