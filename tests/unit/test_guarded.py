"""The guard of the run's long-lived greenlets (loadgen.run.guarded) and what the Locust glue does with
a fault, tested in a child pytest (tests/unit/child_pytest.py says why: loadgen.run.locust_session
imports locust). The tests are in guarded_checks.py."""

from __future__ import annotations

from tests.unit.child_pytest import passes_in_a_child


def test_the_guard_and_the_locust_glue_end_the_run_on_a_fault():
    passes_in_a_child("guarded_checks.py")
