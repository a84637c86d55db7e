"""Batched Locust reporting, tested in a child pytest (tests/unit/child_pytest.py says why). The tests
are in locust_report_batching.py."""

from __future__ import annotations

from tests.unit.child_pytest import passes_in_a_child


def test_batched_reports_match_locusts_own_statistics():
    passes_in_a_child("locust_report_batching.py")
