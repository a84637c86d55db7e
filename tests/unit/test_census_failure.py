"""The end of a run whose census fails (the broker gone): the reason comes back for run.json,
password masked, the dead-letter capture is still stopped, and the queue is not deleted (its
leftovers were never counted). loadgen.run.locust_session.stop writes what this returns and flushes the
traces after it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import loadgen.run.census as census


def _ctx(done: list) -> SimpleNamespace:
    return SimpleNamespace(
        scenario=SimpleNamespace(queue=SimpleNamespace(delete_on_end=True)),
        stop_dead_letter_capture=lambda: done.append("capture stopped"),
        delete_queue=lambda: done.append("queue deleted"),
    )


def test_a_failed_census_returns_why_masked_and_leaves_the_queue(monkeypatch):
    def census_fails(_ctx):
        raise ConnectionError("connection to amqp://guest:s3cret@127.0.0.1:5672/ lost")

    monkeypatch.setattr(census, "take_census", census_fails)
    done: list = []
    depth, error = census.census_then_cleanup(_ctx(done))
    assert depth is None
    assert error == "connection to amqp://guest:****@127.0.0.1:5672/ lost"
    assert done == ["capture stopped"]


def test_a_census_that_counted_the_queue_lets_it_be_deleted(monkeypatch):
    monkeypatch.setattr(census, "take_census", lambda _ctx: 42)
    done: list = []
    assert census.census_then_cleanup(_ctx(done)) == (42, None)
    assert done == ["capture stopped", "queue deleted"]


@pytest.mark.parametrize("exc", [ConnectionError(""), TimeoutError()])
def test_a_failure_without_a_message_is_named_by_its_type(monkeypatch, exc):
    def census_fails(_ctx):
        raise exc

    monkeypatch.setattr(census, "take_census", census_fails)
    assert census.census_then_cleanup(_ctx([]))[1] == type(exc).__name__
