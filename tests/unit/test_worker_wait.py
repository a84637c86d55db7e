"""The master's wait for its workers' traces, tested in a child pytest (tests/unit/child_pytest.py says
why). The tests are in locust_worker_wait.py."""

from __future__ import annotations

from tests.unit.child_pytest import passes_in_a_child


def test_the_master_waits_for_every_workers_traces_and_names_what_never_came():
    passes_in_a_child("locust_worker_wait.py")
