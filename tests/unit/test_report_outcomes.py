"""The report's consumer-outcomes, single-active-consumer and stream sections, rendered from
hand-built summaries (the `outcomes`, `single_active_consumer` and `stream` blocks of docs/summary.md)."""

from __future__ import annotations

from analysis.report import render_report
from tests.unit.test_report import make_summary, section_text

SINGLE_ACTIVE = {
    "periods": [
        {"consumer": "a/h/0", "from_s": 0.0, "to_s": 12.0, "ended_by": "consumer_leave"},
        {"consumer": "b/h/1", "from_s": 12.01, "to_s": None, "ended_by": None},
    ],
    "failovers": [{"from": "a/h/0", "to": "b/h/1", "at_s": 12.01, "gap_ms": 9.9, "ended_by": "consumer_leave"}],
    "overlaps": 0,
}

STREAM = {
    "groups": [
        {"group": "live", "offset": "next", "first_offset": 0, "acked": 4000, "not_yet_read": 0},
        {"group": "audit", "offset": "first", "first_offset": 0, "acked": 3100, "not_yet_read": 900},
    ]
}


def outcomes_block() -> dict:
    row = {
        "group": "flaky",
        "phase": "outage",
        "decided": 2048,
        "acked": 905,
        "requeued": 1048,
        "requeued_fraction": 1048 / 2048,
        "discarded": 53,
        "discarded_fraction": 53 / 2048,
        "rejected": 42,
        "rejected_fraction": 42 / 2048,
        "handler_calls": 0,
        "handler_errors": 3,
        "configured": {"requeue": 0.5, "discard": 0.03, "reject": 0.02},
    }
    return {
        "phases": [row],
        "groups": [{k: v for k, v in row.items() if k not in ("phase", "configured")}],
        "requeued": [
            {
                "group": "flaky",
                "messages": 910,
                "deliveries": 2419,
                "deliveries_per_message": 2419 / 910,
                "ended": {"acked": 848, "consumer_reject": 27},
                "first_delivery_to_ack_ms": {"count": 848, "p50": 4.7, "max": 28.9},
            }
        ],
    }


def test_each_phase_shows_the_measured_shares_beside_the_rates_asked_for():
    summary = make_summary()
    summary["outcomes"] = outcomes_block()
    text = section_text(render_report(summary), "outcomes")
    assert "1,048 (51.2 %) asked 50.0 %" in text
    assert "53 (2.6 %) asked 3.0 %" in text and "42 (2.1 %) asked 2.0 %" in text
    assert "2.66" in text and "acked 848, consumer_reject 27" in text  # the requeued messages followed


def test_a_single_active_consumer_failover_shows_who_and_the_gap():
    summary = make_summary()
    summary["single_active_consumer"] = SINGLE_ACTIVE
    text = section_text(render_report(summary), "single_active")
    assert "one active consumer at a time" in text and "a/h/0" in text and "b/h/1" in text
    assert "9.9" in text and "the end" in text


def test_a_run_whose_consumers_only_acked_has_no_section():
    summary = make_summary()
    summary["outcomes"] = {}
    page = render_report(summary)
    assert 'id="outcomes"' not in page and 'href="#outcomes"' not in page


def test_a_stream_shows_each_group_and_names_the_one_behind():
    summary = make_summary()
    summary["stream"] = STREAM
    summary["messages"]["not_yet_read"] = 900
    summary["messages"]["acked"] -= 900
    page = render_report(summary)
    text = section_text(page, "stream")
    assert "1 group(s) had not read every message" in text and "audit" in text
    assert "3,100" in text and "900" in text
    accounting = section_text(page, "accounting")
    assert "not yet read" in accounting and "the identity holds" in accounting


def test_a_queue_that_is_not_a_stream_has_no_stream_section_and_no_not_yet_read_term():
    page = render_report(make_summary())
    assert 'id="stream"' not in page and "not yet read" not in page
