"""The analysis benchmark's accounting check (benchmarks/analysis.py): a recorded run's summary
predates discard classes added since, which must then be zero, not a mismatch."""

from __future__ import annotations

from benchmarks.analysis import accounting_matches

RECORDED = {"publish_nacked": 0, "egress_discard": 2}  # as a summary written before lost_with_queue


def test_a_class_added_since_the_recording_matches_when_it_counts_nothing():
    assert accounting_matches({"publish_nacked": 0, "egress_discard": 2, "lost_with_queue": 0}, RECORDED)


def test_a_class_added_since_the_recording_that_counts_messages_is_a_mismatch():
    assert not accounting_matches({"publish_nacked": 0, "egress_discard": 2, "lost_with_queue": 1}, RECORDED)


def test_a_recorded_class_that_counts_otherwise_or_is_gone_is_a_mismatch():
    assert not accounting_matches({"publish_nacked": 0, "egress_discard": 3}, RECORDED)
    assert not accounting_matches({"publish_nacked": 0}, RECORDED)


def test_counts_match_only_when_equal():
    assert accounting_matches(5951, 5951)
    assert not accounting_matches(5950, 5951)
