"""The guard of the run's long-lived greenlets (loadgen.run.guarded), and what the Locust glue does
with a fault: the run ends at once, as a stopped test ends, with run.json status failed and exit
status 6 (loadgen.run.locust_session)."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import gevent
import pytest

from loadgen.errors import EXIT_INTERNAL
from loadgen.run import guarded, locust_session
from loadgen.run.guarded import FAULT_ENV, Fault, InjectedFault


@pytest.fixture(autouse=True)
def _no_process_handler(monkeypatch):
    monkeypatch.delenv(FAULT_ENV, raising=False)
    previous = guarded.set_handler(None)
    yield
    guarded.set_handler(previous)


def _drain_monitor_that_breaks():
    gevent.sleep(0)
    {}["queue depth"]  # the bug the guard is for


def test_an_exception_is_handed_over_with_its_traceback_and_the_greenlet_ends(caplog):
    faults: list[Fault] = []
    with caplog.at_level(logging.ERROR, logger="sojourn"):
        g = guarded.spawn("drain_monitor", _drain_monitor_that_breaks, on_fault=faults.append)
        g.join(5)
    assert g.dead and g.successful() and g.value is None  # gevent prints nothing of its own
    (fault,) = faults
    assert fault.part == "drain_monitor"
    assert fault.error == "KeyError: 'queue depth'"
    assert "_drain_monitor_that_breaks" in fault.traceback and fault.traceback.rstrip().endswith(
        "KeyError: 'queue depth'"
    )
    assert "the drain_monitor greenlet failed" in caplog.text and "_drain_monitor_that_breaks" in caplog.text


def test_passwords_are_masked_in_the_fault_and_the_log(caplog):
    def breaks():
        raise RuntimeError("cannot reach amqp://ops:hunter2@broker:5672/")

    faults: list[Fault] = []
    with caplog.at_level(logging.ERROR, logger="sojourn"):
        guarded.spawn("queue_sampler", breaks, on_fault=faults.append).join(5)
    (fault,) = faults
    assert "ops:****@broker" in fault.error
    assert "hunter2" not in fault.error + fault.traceback + caplog.text


def test_a_greenlet_that_returns_or_is_killed_is_no_fault():
    faults: list[Fault] = []
    done = guarded.spawn("timeline", lambda x: x * 2, 21, on_fault=faults.append)
    done.join(5)
    assert done.value == 42
    forever = guarded.spawn("progress", gevent.sleep, 60, on_fault=faults.append)
    gevent.sleep(0)
    forever.kill(block=True, timeout=5)
    assert forever.dead and faults == []


def test_the_process_handler_takes_faults_unless_the_spawn_names_its_own():
    seen: list[str] = []
    guarded.set_handler(lambda f: seen.append(f"process {f.part}"))
    guarded.spawn("stats_batcher", _drain_monitor_that_breaks).join(5)
    guarded.spawn("trace_flush", _drain_monitor_that_breaks, on_fault=lambda f: seen.append(f"own {f.part}")).join(5)
    assert seen == ["process stats_batcher", "own trace_flush"]


def test_a_handler_that_fails_is_logged_and_goes_no_further(caplog):
    def bad_handler(_fault):
        raise OSError("run.json: disk full")

    with caplog.at_level(logging.ERROR, logger="sojourn"):
        g = guarded.spawn("memory_sampler", _drain_monitor_that_breaks, on_fault=bad_handler)
        g.join(5)
    assert g.successful()
    assert "handling the failure of the memory_sampler greenlet failed" in caplog.text and "disk full" in caplog.text


def test_only_known_parts_are_spawned():
    with pytest.raises(AssertionError):
        guarded.spawn("drain monitor", lambda: None)


def test_the_test_hook_raises_in_the_named_part_after_its_delay_past_any_except_exception(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "drain_monitor@0.2")
    swallowed = []

    def careful_loop():  # as the drain's probes are: nothing that is an Exception gets out
        while True:
            try:
                gevent.sleep(0.01)
            except Exception as exc:  # noqa: BLE001
                swallowed.append(exc)

    faults: list[Fault] = []
    started = time.monotonic()
    g = guarded.spawn("drain_monitor", careful_loop, on_fault=faults.append)
    other = guarded.spawn("lateness_watch", gevent.sleep, 0.5, on_fault=faults.append)
    g.join(5)
    took = time.monotonic() - started
    other.join(5)
    assert 0.2 <= took < 2
    assert [f.part for f in faults] == ["drain_monitor"] and swallowed == []
    assert faults[0].error == f"InjectedFault: {FAULT_ENV}=drain_monitor@0.2: injected fault"
    assert issubclass(InjectedFault, BaseException) and not issubclass(InjectedFault, Exception)


def test_the_test_hook_without_a_delay_raises_before_the_part_runs(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "start_waiter")
    ran, faults = [], []
    guarded.spawn("start_waiter", lambda: ran.append(1), on_fault=faults.append).join(5)
    assert ran == [] and [f.part for f in faults] == ["start_waiter"]


# -- the Locust glue: a fault ends the run ----------------------------------------------------------


class _Runner:
    def __init__(self):
        self.calls: list[str] = []
        self.sent: list[tuple[str, dict]] = []

    def stop(self):
        self.calls.append("stop")

    def quit(self):
        self.calls.append("quit")

    def send_message(self, kind, data):
        self.sent.append((kind, data))


class _Ctx:
    worker = "host-1"

    def __init__(self, run_dir):
        self.run_dir = str(run_dir)
        self.events: list[tuple] = []

    def event(self, kind, source, name, value=None, detail=None):
        self.events.append((kind, source, name, detail))


@pytest.fixture
def session(tmp_path, monkeypatch):
    """locust_session's state for one run in progress, its run.json written, reset afterwards."""
    (tmp_path / "run.json").write_text(json.dumps({"status": "running"}))
    env = SimpleNamespace(runner=_Runner(), process_exit_code=None)
    ctx = _Ctx(tmp_path)
    for name, value in {
        "ctx": ctx,
        "role": "local",
        "fault": None,
        "ended": False,
        "failed": False,
        "headless": True,
    }.items():
        monkeypatch.setattr(locust_session._State, name, value)
    return env, ctx


def test_a_fault_in_the_local_runner_is_traced_and_stops_then_quits_the_test(session, capsys):
    env, ctx = session
    locust_session._on_fault(env, Fault("timeline", "KeyError: 'x'", "Traceback ...\nKeyError: 'x'\n"))
    gevent.sleep(0.01)  # the stop runs in a greenlet of its own, not in the failed one
    assert env.runner.calls == ["stop", "quit"]
    assert env.process_exit_code == EXIT_INTERNAL == 6
    ((kind, source, name, detail),) = ctx.events
    assert (kind, source, name) == ("internal_error", "runner", "timeline")
    assert detail["error"] == "KeyError: 'x'" and "Traceback" in detail["traceback"]
    assert detail["process"] == "local process host-1"
    said = capsys.readouterr().err
    assert "the timeline greenlet of the local process host-1 failed (KeyError: 'x')" in said
    assert "exit status 6" in said
    # what stop() writes into run.json once the test has stopped
    assert locust_session._fault_fields() == {
        "error": "internal error: the timeline greenlet of the local process host-1 failed: KeyError: 'x'",
        "internal_error": {"part": "timeline", "process": "local process host-1", "error": "KeyError: 'x'"},
    }


def test_a_second_fault_while_the_run_ends_does_not_stop_it_again(session):
    env, _ctx = session
    locust_session._on_fault(env, Fault("progress", "ValueError: a", ""))
    locust_session._on_fault(env, Fault("queue_sampler", "ValueError: b", ""))
    gevent.sleep(0.01)
    assert env.runner.calls == ["stop", "quit"]
    assert locust_session._State.fault is not None and locust_session._State.fault["part"] == "progress"


def test_under_the_web_ui_the_test_stops_and_locust_stays(session, monkeypatch):
    env, _ctx = session
    monkeypatch.setattr(locust_session._State, "headless", False)
    locust_session._on_fault(env, Fault("progress", "ValueError: a", ""))
    gevent.sleep(0.01)
    assert env.runner.calls == ["stop"]


def test_a_workers_fault_is_traced_there_and_sent_to_the_master(session, monkeypatch):
    env, ctx = session
    monkeypatch.setattr(locust_session._State, "role", "worker")
    locust_session._on_fault(env, Fault("drain_monitor", "KeyError: 'x'", "tb"))
    gevent.sleep(0.01)
    assert env.runner.calls == [] and env.process_exit_code is None  # the master ends the run
    assert env.runner.sent == [
        ("sojourn_fault", {"part": "drain_monitor", "process": "worker process host-1", "error": "KeyError: 'x'"})
    ]
    assert [e[0] for e in ctx.events] == ["internal_error"]


def test_a_fault_after_the_run_ended_marks_run_json_failed_without_stopping_anything(session, monkeypatch, tmp_path):
    env, _ctx = session
    monkeypatch.setattr(locust_session._State, "ended", True)
    locust_session._end_on_fault(env, {"part": "finish_reporter", "process": "worker process w-2", "error": "E: x"})
    gevent.sleep(0.01)
    assert env.runner.calls == []
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and run["internal_error"]["process"] == "worker process w-2"
    assert env.process_exit_code == 6


def test_sojourn_run_reads_the_fault_from_run_json_and_says_it(tmp_path, capsys):
    from loadgen.commands.common import EXIT_INTERNAL as CLI_EXIT_INTERNAL, ended_by_internal_error

    assert CLI_EXIT_INTERNAL == 6
    (tmp_path / "run.json").write_text(json.dumps({"status": "interrupted", "census_error": None}))
    assert ended_by_internal_error(str(tmp_path)) is None and capsys.readouterr().err == ""
    error = "internal error: the timeline greenlet of the local process h-1 failed: KeyError: 'x'"
    (tmp_path / "run.json").write_text(
        json.dumps({"status": "failed", "error": error, "internal_error": {"part": "timeline"}})
    )
    assert ended_by_internal_error(str(tmp_path), analysed=False) == error
    said = capsys.readouterr().err
    assert f"ended early by an {error}" in said and "exit status 6" in said and "analysed" not in said


def test_a_fault_after_a_failed_start_leaves_that_error_and_its_exit_status(session, monkeypatch):
    env, _ctx = session
    env.process_exit_code = 2
    monkeypatch.setattr(locust_session._State, "failed", True)
    locust_session._end_on_fault(env, {"part": "memory_sampler", "process": "local process h", "error": "E: x"})
    gevent.sleep(0.01)
    assert env.runner.calls == [] and env.process_exit_code == 2 and locust_session._State.fault is None
